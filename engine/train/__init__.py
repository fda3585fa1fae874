"""Short training runs on offline data, persisted step by step (see loop.py, data.py, store.py, ddp.py)."""
from engine.train.data import Dataset, load_data
from engine.train.loop import RunResult, StepRecord, TrainConfig, train
from engine.train.small import small_version
from engine.train.store import RunStore

__all__ = ["Dataset", "RunResult", "RunStore", "StepRecord", "TrainConfig", "load_data", "small_version", "train"]
