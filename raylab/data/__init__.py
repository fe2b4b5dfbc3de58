"""The data sources: dataset.py, in-memory datasets (Dataset, as_dataset, the object-store hand-off and sharding);
readers.py, the bundled readers (IDX, CIFAR-10, the data search path); stream.py: a user's own files (Parquet,
image folders) streamed through Ray Data; scenes.py: the synthetic segmentation scenes; shard.py: a worker's data,
in memory or streamed. This module only re-exports.

Data is read once on the driver, put into Ray's object store as numpy arrays (workers get
zero-copy read-only views) and each worker takes a disjoint, seeded shard of it. No worker
ever opens a driver-local path, so the same code works on a multi-node cluster.
"""

from raylab.data.dataset import Dataset, as_dataset, num_items, put_dataset, shard_indices, tree_map
from raylab.data.readers import FASHION_FILES, cifar10, data_search_path, fashion_mnist, find_idx_files, mnist, read_idx

__all__ = ["Dataset", "cifar10", "data_search_path", "fashion_mnist", "mnist", "read_idx", "scenes", "stream"]
