"""ResNet-UNet training on the seed's full-size data: 1.2 million 96x96x3 procedural scenes, streamed.

The task is recipes/resunet_train.py's (the same model, loss, metrics, batch and steps); only the data
differs: raylab.data.scenes.scene_stream generates 1,200,000 training scenes (33 GB as uint8 images, 133 GB
with their float32 mask and depth targets) on Ray Data's side as the trial trains, so nothing is held on
the driver and each worker holds only its prefetch buffers. An epoch is still 100 steps (the recipe's
steps_per_epoch): one pass over 1.2M scenes at about 1 s per image on a CPU would take two weeks.
Ray Data needs a CPU beside the training workers: on a 2-CPU machine a 1-worker trial leaves it one.

    python recipes/resunet_stream.py --quick --trials torch:none      # 40 streamed scenes, 32 test scenes
    python recipes/resunet_stream.py --trials torch:none,tf:none
"""

import importlib.util
from pathlib import Path

from raylab import main
from raylab.data.scenes import SEED_SCENES, scene_stream

_spec = importlib.util.spec_from_file_location("resunet_train", Path(__file__).with_name("resunet_train.py"))
_train = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_train)

RECIPE = _train.RECIPE.variant(
    name="resunet_stream",
    data=scene_stream(SEED_SCENES, _train.TEST_SCENES),
    default_trials=("torch:none", "tf:none"),
    doc=__doc__,
)

if __name__ == "__main__":
    main(RECIPE)
