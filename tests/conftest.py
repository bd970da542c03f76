import os

# litellm must never reach for the network to fetch its model price map.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
