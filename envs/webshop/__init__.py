"""WebShop (Yao et al., 2022) as a faithful text environment: catalogue, search, pages, reward, engine, benchmark."""
