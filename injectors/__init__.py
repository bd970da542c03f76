"""faultlens injectors: the failure taxonomy, task environments with simulated agents,
error generators and the warm-start injection pipeline.

    from faultlens.injectors.pipeline import InjectConfig, inject
    result = inject(InjectConfig(envs=["research_team", "table_qa"], seeds=20, per_seed=4))

`injectors.envs` holds the environments (`get(name)`, `names()`), `injectors.sim`
the simulated agents (litellm provider `faultlens-sim/<env>`),
`injectors.generators` the error generators, `middleware.replay.session` the
record/replay session the pipeline warm-starts from.
"""

from typing import Any

__all__ = ["InjectConfig", "InjectResult", "inject"]


def __getattr__(name: str) -> Any:
    # Lazy, so `import injectors.applicability` stays light.
    if name in __all__:
        from . import pipeline

        return getattr(pipeline, name)
    raise AttributeError(name)
