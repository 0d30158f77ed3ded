"""The shape of one serving instance: how many GPUs it spans and how the model is split over them."""

from __future__ import annotations

from prfaas_plan._frozen import frozen


@frozen
class InstanceShape:
    """GPUs per instance and the parallel degrees over them (``physics.shapes`` prices and checks it).

    The attention side (attention, dense FFNs, shared experts, embeddings) runs ``attention_data_parallel``
    replicas, each tensor-parallel over ``tensor_parallel`` GPUs, so tensor_parallel x attention_data_parallel =
    ``gpus``. The routed experts are tensor-parallel over all ``gpus`` (``expert_parallel`` 1) or spread whole
    over them (``expert_parallel`` = ``gpus``). Attention data parallelism needs expert parallelism (the
    experts are what the replicas share)."""

    gpus: int
    tensor_parallel: int
    expert_parallel: int = 1
    attention_data_parallel: int = 1

    @property
    def label(self) -> str:
        """A short name: ``TP8``, ``TP8 EP8``, ``DP8 EP8`` or ``TP2 DP4 EP8`` (``DP`` = attention data parallel)."""
        parts = []
        if self.tensor_parallel > 1 or self.attention_data_parallel == 1:
            parts.append(f"TP{self.tensor_parallel}")
        if self.attention_data_parallel > 1:
            parts.append(f"DP{self.attention_data_parallel}")
        if self.expert_parallel > 1:
            parts.append(f"EP{self.expert_parallel}")
        return " ".join(parts)

    def problems(self) -> list[str]:
        """Why the degrees do not describe ``gpus`` GPUs (empty when they do)."""
        found = []
        if self.gpus < 1 or self.tensor_parallel < 1 or self.attention_data_parallel < 1:
            found.append("gpus, tensor_parallel and attention_data_parallel must be >= 1")
        elif self.tensor_parallel * self.attention_data_parallel != self.gpus:
            found.append(
                f"tensor_parallel x attention_data_parallel must equal the instance's {self.gpus} GPUs, got "
                f"{self.tensor_parallel} x {self.attention_data_parallel}"
            )
        if self.expert_parallel not in (1, self.gpus):
            found.append(f"expert_parallel must be 1 or the instance's {self.gpus} GPUs, got {self.expert_parallel}")
        if self.attention_data_parallel > 1 and self.expert_parallel == 1:
            found.append("attention_data_parallel > 1 needs expert_parallel (the replicas share the experts)")
        return found


def tensor_parallel(gpus: int) -> InstanceShape:
    """The shape every instance had before shapes existed: tensor parallelism over all ``gpus``."""
    return InstanceShape(gpus=gpus, tensor_parallel=gpus)
