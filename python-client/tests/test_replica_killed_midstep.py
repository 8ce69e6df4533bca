"""Issue 35 item 3 (without Ray): a replica that dies in the middle of a vector step is a
``session_lost`` outcome for each of its sub-envs, never an exception for the whole step; the
same for the async env. The step returns within the client timeout plus slack.

The step must be in flight when the replica dies: the replica process is stopped (SIGSTOP, so
the step takes a while: it cannot answer) before the step is sent, and killed (SIGKILL) while the
step waits. The serve process restarts it on the same endpoint; the request is lost with it."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

from envscaler import AsyncEnvScalerEnv, EnvScalerVectorEnv

from helpers import NOTES_ENVS, REFERENCE_ACTIONS, start_bridge, wait_for

ADD, DELETE = REFERENCE_ACTIONS
TIMEOUT_S = 3.0
#: on top of the client timeout: the other replica's answer, the close of the lost sessions, 2 busy cores
SLACK_S = 4.0


def _kill_later(pid: int, after_s: float) -> threading.Thread:
    t = threading.Thread(target=lambda: (time.sleep(after_s), os.kill(pid, signal.SIGKILL)), daemon=True)
    t.start()
    return t


def test_a_replica_killed_mid_step_is_session_lost_for_each_of_its_sub_envs():
    with start_bridge(envs=[NOTES_ENVS], replicas=2) as b:
        vec = EnvScalerVectorEnv(b.endpoints, num_envs=4, scenario_ids=["notes-1"], timeout=TIMEOUT_S)
        try:
            vec.reset(seed=1)
            pids = b.replica_pids()
            assert len(pids) == 2
            victim = pids[0]
            os.kill(victim, signal.SIGSTOP)  # it takes the step and cannot answer
            killer = _kill_later(victim, 0.5)
            t0 = time.monotonic()
            _obs, rewards, terminated, truncated, infos = vec.step([ADD] * 4)
            took = time.monotonic() - t0
            killer.join()
            assert took < TIMEOUT_S + SLACK_S, took
            codes = [str(infos["error"]["code"][i]) if infos["error"]["_code"][i] else None for i in range(4)]
            lost = [i for i in range(4) if codes[i] == "session_lost"]
            # exactly the sub-envs of one replica (0 and 2, or 1 and 3) were lost; the others stepped
            assert lost in ([0, 2], [1, 3]), codes
            for i in range(4):
                if i in lost:
                    assert truncated[i] and not terminated[i] and rewards[i] == 0
                else:
                    assert not truncated[i] and infos["observation"]["role"][i] == "tool" and infos["step"][i] == 1

            # the lost ones are autoreset on the restarted replica and play on
            def recovered():
                _, _, _, tr, info = vec.step([DELETE] * 4)
                return not tr.any() and "_error" not in info and all(vec.episodes[i].live for i in range(4))

            wait_for(recovered, 60, interval=0.2, what="the lost sub-envs to play again")
        finally:
            vec.close()


def test_the_async_env_answers_a_replica_killed_mid_step_with_session_lost():
    with start_bridge(envs=[NOTES_ENVS], replicas=2) as b:

        async def main() -> None:
            envs = [AsyncEnvScalerEnv(ep, scenario_ids=["notes-1"], timeout=TIMEOUT_S) for ep in b.endpoints]
            try:
                for e in envs:
                    await e.reset(seed=2)
                victim = b.replica_pids()[0]
                os.kill(victim, signal.SIGSTOP)
                killer = _kill_later(victim, 0.5)
                t0 = time.monotonic()
                results = await asyncio.gather(*(e.step(ADD) for e in envs))
                took = time.monotonic() - t0
                killer.join()
                assert took < TIMEOUT_S + SLACK_S, took
                lost = [r for r in results if r[4].get("error", {}).get("code") == "session_lost"]
                fine = [r for r in results if "error" not in r[4]]
                assert len(lost) == 1 and len(fine) == 1, results
                assert lost[0][3] and not lost[0][2]  # truncated, not terminated
                assert fine[0][4]["observation"]["role"] == "tool"
                # the lost one starts again in a new session once its replica is back
                gone = next(e for e, r in zip(envs, results) if r is lost[0])
                assert gone.session_id is None
                for _ in range(60):
                    try:
                        await gone.reset(seed=3)
                        break
                    except Exception:
                        await asyncio.sleep(0.5)
                step = await gone.step(ADD)
                assert step[4]["observation"]["role"] == "tool"
            finally:
                for e in envs:
                    await e.close()

        asyncio.run(main())
