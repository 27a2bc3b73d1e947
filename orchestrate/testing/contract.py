"""The provider contract: what the lifecycle relies on, as tests any provider can run against itself.

Use it from your provider's test module (this project's or a third-party package's):

    from orchestrate.testing import ProviderContract   # installed with keras-cloud-bench

    class TestMyCloudContract(ProviderContract):
        def make_provider(self):                # a provider wired to your test cloud (fake API, sandbox account)
            return MyCloudProvider(...)

        def make_profile(self):                 # a catalog Profile your provider can launch
            return Profile(name="mycloud-small", provider="mycloud", machine_type="small", zones=("zone-a",))

    # when its machines run an sshd the test can log in to, add the login check:
    # class TestMyCloudContract(ProviderContract, SSHLoginContract): ...

pytest collects every `test_*` method. Each test launches at most one machine and terminates it in a
`finally`, so a failing assertion leaves nothing behind. What is checked:

- `name` and `capabilities` are declared and `describe()` says where it runs; `from_settings({})` or the
  test's own factory builds it;
- `check_credentials` passes with the test's credentials; `validate_profile` accepts the profile;
- `launch` returns an Instance of this provider, in the requested zone, carrying the run's tags;
- `wait_until_running` gives state RUNNING and an SSH address (unless the provider runs locally), and (with
  the `SSHLoginContract` mixin) that address accepts a login;
- `list_instances` shows a machine it created, by its project tag, and stops showing it once terminated;
- `terminate` and `release_run` are idempotent: the second call succeeds too, and `leftover_runs` no longer
  names the run once released;
- a terminated machine is not RUNNING;
- a provider that can leave leftovers (Capability.LEFTOVERS) leaves none the sweep cannot find, whichever step
  a crash (`kill -9`) cuts short: right after `launch` the machine is listed under the run's tag, and from
  `launch` until `release_run`, while the cloud holds anything of the run beyond its machine (key pairs,
  firewall rules, local keys), `leftover_runs()` names the run, so the sweep can release it with no machine
  left; `release_run` then really deletes it all (a `release_run` that does nothing fails). `leftover_runs` and
  `release_run` are therefore required of such a provider;
- what the cloud holds is asked of the cloud, never of the provider under test (a provider that forgets a
  resource would also forget to report it): the test's `run_resources(run_id)`, required with LEFTOVERS, reads
  the cloud (and this machine) directly and returns each resource's kind ('key pair', 'security group', 'local
  key file') with a function that deletes it, or `{}` where launch creates nothing beyond the machine. The suite
  checks that `release_run` leaves none of them, and that each kind, left alone by a kill half-way through
  `release_run`, still makes `leftover_runs` name the run.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from orchestrate.provider import PROJECT_TAG, Capability, Instance, InstanceState, LaunchRequest, Provider
from records.catalog import Profile


class ProviderContract:
    boot_timeout_s: float = 120.0
    max_lifetime_s: int = 1800

    def make_provider(self) -> Provider:
        raise NotImplementedError("return the provider under test, wired to its test cloud")

    def make_profile(self) -> Profile:
        raise NotImplementedError("return a Profile this provider can launch")

    def run_resources(self, run_id: str) -> dict[str, Callable[[], None]]:
        """What the test cloud and this machine hold for `run_id`, beyond its machine: each resource's kind, the
        same for every run ('key pair', 'security group', 'local key file'), with a function that deletes it.
        Read it from the cloud's own API (your fake's or sandbox's client) and the file system, never through the
        provider under test: a provider that forgets a resource would also forget to report it. `{}` where
        launch creates nothing beyond the machine. Required when the provider has Capability.LEFTOVERS."""
        raise NotImplementedError(
            "a provider with Capability.LEFTOVERS: define run_resources(run_id) in the contract subclass, returning "
            "{kind: delete function} for what the cloud holds for the run (read from the cloud directly, not "
            "through the provider; {} if launch creates nothing beyond the machine)"
        )

    def make_request(self, profile: Profile) -> LaunchRequest:
        run_id = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{uuid.uuid4().hex[:4]}"
        tags = {
            "project": PROJECT_TAG,
            "run-id": run_id,
            "owner": "contract@test",
            "profile": profile.name,
            "expiry": str(int(time.time() + self.max_lifetime_s)),
        }
        zone = profile.zones[0] if profile.zones else None
        return LaunchRequest(run_id, profile, zone, spot=False, max_lifetime_s=self.max_lifetime_s, tags=tags)

    # ---- fixtures ------------------------------------------------------------------------------------------

    @pytest.fixture
    def provider(self) -> Provider:
        return self.make_provider()

    @pytest.fixture
    def request_(self) -> LaunchRequest:
        return self.make_request(self.make_profile())

    @pytest.fixture
    def running(self, provider: Provider, request_: LaunchRequest) -> Iterator[Instance]:
        instance = provider.launch(request_)
        try:
            yield provider.wait_until_running(instance, self.boot_timeout_s)
        finally:
            provider.terminate(instance)
            provider.release_run(request_.run_id)

    # ---- the contract --------------------------------------------------------------------------------------

    def test_declares_name_and_kind(self, provider: Provider) -> None:
        assert isinstance(provider.name, str) and provider.name
        assert all(isinstance(c, Capability) for c in provider.capabilities)
        assert isinstance(provider.describe(), str) and provider.describe()

    def test_credentials_and_profile_are_accepted(self, provider: Provider, request_: LaunchRequest) -> None:
        provider.check_credentials()
        provider.validate_profile(request_.profile)

    def test_launch_returns_a_running_instance_with_the_run_tags(
        self, provider: Provider, request_: LaunchRequest, running: Instance
    ) -> None:
        assert running.provider == provider.name
        assert running.instance_id
        if request_.zone is not None:
            assert running.zone == request_.zone
        assert provider.state(running) == InstanceState.RUNNING
        assert running.ssh is not None or provider.has(Capability.RUNS_LOCALLY)
        if provider.has(Capability.LEFTOVERS):
            for key, value in request_.tags.items():
                assert running.tags.get(key) == value, f"tag {key}"

    def test_list_instances_finds_what_it_launched(
        self, provider: Provider, request_: LaunchRequest, running: Instance
    ) -> None:
        listed = provider.list_instances()
        if not provider.has(Capability.LEFTOVERS):
            assert listed == []  # nothing it could leave behind
            return
        mine = [i for i in listed if i.instance_id == running.instance_id]
        assert len(mine) == 1
        assert mine[0].tags.get("project") == PROJECT_TAG
        assert mine[0].tags.get("run-id") == request_.run_id
        assert all(i.tags.get("project") == PROJECT_TAG for i in listed)

    def test_terminate_and_release_are_idempotent(self, provider: Provider, request_: LaunchRequest) -> None:
        instance = provider.wait_until_running(provider.launch(request_), self.boot_timeout_s)
        try:
            provider.terminate(instance)
        finally:
            provider.terminate(instance)  # a second teardown (Ctrl-C during teardown, then the sweep)
            provider.release_run(request_.run_id)
            provider.release_run(request_.run_id)
        if provider.has(Capability.FRESH_HOST):
            assert provider.state(instance) != InstanceState.RUNNING
            assert instance.instance_id not in {i.instance_id for i in provider.list_instances()}
        assert request_.run_id not in provider.leftover_runs()  # released: nothing of the run for the sweep

    def test_a_crash_at_any_step_leaves_nothing_the_sweep_cannot_find(
        self, provider: Provider, request_: LaunchRequest
    ) -> None:
        """After each step a `kill -9` may end the orchestrator at: what the sweep is shown must lead to every
        resource of the run; then `release_run` must delete them all."""
        if not provider.has(Capability.LEFTOVERS):
            pytest.skip("the provider declares it leaves nothing behind (no Capability.LEFTOVERS)")
        run_id = request_.run_id
        instance = provider.launch(request_)
        try:
            listed = {i.instance_id: i.tags.get("run-id") for i in provider.list_instances()}
            assert listed.get(instance.instance_id) == run_id, "killed after launch: the machine must be listed"
            self._assert_leftovers_named(provider, run_id, "killed after launch")
            instance = provider.wait_until_running(instance, self.boot_timeout_s)
            provider.terminate(instance)
            self._assert_leftovers_named(provider, run_id, "killed between terminate and release_run")
        finally:
            provider.terminate(instance)
            provider.release_run(run_id)
        self._assert_released(provider, run_id)
        assert instance.instance_id not in {i.instance_id for i in provider.list_instances()}

    def test_each_resource_left_alone_is_found_by_the_sweep(self, provider: Provider, request_: LaunchRequest) -> None:
        """A kill half-way through `release_run` (or a cloud call that failed there) can leave any one of the
        run's resources alone: `leftover_runs` must name the run from each of them, or the sweep never deletes
        it. One run per kind of resource: launch, terminate, delete every other kind, ask the sweep."""
        if not provider.has(Capability.LEFTOVERS):
            pytest.skip("the provider declares it leaves nothing behind (no Capability.LEFTOVERS)")
        kinds: list[str] = []
        request = request_
        while True:
            instance = provider.launch(request)
            try:
                provider.terminate(instance)
                resources = self.run_resources(request.run_id)
                kinds = kinds or sorted(resources)
                if not kinds:
                    pytest.skip(f"the cloud holds nothing of run {request.run_id} beyond its machine")
                alone = kinds.pop(0)
                for kind, delete in resources.items():
                    if kind != alone:
                        delete()
                assert alone in self.run_resources(request.run_id), f"launch created no {alone} for this run"
                assert request.run_id in provider.leftover_runs(), (
                    f"killed in release_run with only the run's {alone} left: leftover_runs() does not name run "
                    f"{request.run_id}, so the sweep never deletes its {alone}"
                )
            finally:
                provider.terminate(instance)
                provider.release_run(request.run_id)
            self._assert_released(provider, request.run_id)
            if not kinds:
                return
            request = self.make_request(request.profile)

    def _assert_released(self, provider: Provider, run_id: str) -> None:
        left = sorted(self.run_resources(run_id))
        assert not left, f"release_run left the run's {', '.join(left)} in the cloud"
        assert run_id not in provider.leftover_runs(), "release_run left resources that leftover_runs still names"

    def _assert_leftovers_named(self, provider: Provider, run_id: str, when: str) -> None:
        """Whatever the cloud holds of the run (`run_resources`, read from the cloud), the sweep must be led to."""
        leftovers = provider.leftover_runs()
        assert all(isinstance(tags, dict) for tags in leftovers.values())
        held = sorted(self.run_resources(run_id))
        if held:
            assert run_id in leftovers, (
                f"{when}: the cloud holds the run's {', '.join(held)}, but leftover_runs() does not name run "
                f"{run_id}, so the sweep cannot release them"
            )
            assert leftovers[run_id].get("run-id", run_id) == run_id


class SSHLoginContract:
    """Add to a ProviderContract subclass whose launched machines run an sshd the test can log in to:

    class TestMyCloudContract(ProviderContract, SSHLoginContract): ...
    """

    boot_timeout_s: float  # ProviderContract's

    def test_ssh_address_accepts_a_login(self, provider: Provider, running: Instance) -> None:
        from orchestrate.remote import SSHHost, wait_for_ssh

        assert running.ssh is not None
        host = SSHHost(running.ssh, verify_known_hosts=False)
        try:
            wait_for_ssh(host, self.boot_timeout_s)
            assert host.run("echo contract").stdout.strip() == "contract"
        finally:
            host.close()
