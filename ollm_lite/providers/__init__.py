"""Provider adapters: one module per backend, all behind :class:`ProviderAdapter`."""
