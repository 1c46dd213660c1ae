"""Use cases of the wallet, over the ports in ports.py."""
