"""(being written)"""

ROUTES: list = []
