# src/market.mk: market model, catalogs, sim provider
