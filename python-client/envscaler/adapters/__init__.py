"""Env classes for RL frameworks, each running its episodes on the bridge.

- ``envscaler.adapters.roll.EnvScalerRollEnv`` (+ ``register_roll``): the ROLL pipeline's EnvScaler env API.
- ``envscaler.adapters.gem.EnvScalerGemEnv``: GEM's ``gem.core.Env`` API.
- ``envscaler.adapters.trl.TRLEnvironments``: TRL ``GRPOTrainer(environment_factory=...)`` classes.
- ``envscaler.adapters.skyrl.EnvScalerTextEnv``: SkyRL's ``BaseTextEnv``.
- ``envscaler.adapters.openrlhf_agent``: an OpenRLHF ``--agent_func_path`` file.
- ``envscaler.adapters.trl_rollout.TRLRollout``: TRL ``GRPOTrainer(rollout_func=...)`` (conversations, fork groups).
- ``envscaler.adapters.verl.EnvScalerAgentLoop``: verl's agent loop ``envscaler``.
- ``envscaler.adapters.verifiers_env``: a verifiers (0.3.1, v0) ``MultiTurnEnv`` with ``load_environment``.
- ``envscaler.adapters.token_episode``: an episode as token ids with your own ``generate`` (the core of the two above).

Each framework is imported only by its own module, so none is a dependency (docs/training.md).
"""
