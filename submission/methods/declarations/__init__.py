"""Each method's declaration, torch-free, one module per method of submission/methods/ (same
name): its settings class (listed in settings.Settings) and its `Method` record (listed in
submission.methods.ALL). The method's own module holds its code."""
