"""Stand-in for WebShop's ``web_agent_site`` package (see tests/stand_ins/README.md)."""
