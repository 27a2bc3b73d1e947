"""The shipped provider contract (orchestrate.testing.ProviderContract) against the Slurm provider and the real
one-node cluster: each "machine" is a job array of one task (the task image's 600 s item), submitted over SSH."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import replace

import pytest

from orchestrate.plan import WorkItem
from orchestrate.provider import LaunchRequest, Provider
from orchestrate.providers.slurm import SlurmProvider
from orchestrate.testing import ProviderContract
from records.catalog import Profile, load_catalog
from tests.orchestrate.orchestrate_helpers import plan_on_image
from tests.slurm.conftest import PROFILE, SlurmSite
from tests.slurm.helpers import run_folder

pytestmark = [pytest.mark.docker, pytest.mark.sshd]


class TestSlurmContract(ProviderContract):
    boot_timeout_s = 60.0

    @pytest.fixture(autouse=True)
    def _site(self, slurm_site: SlurmSite, task_image: str, tmp_path) -> None:
        self.site, self.image, self.tmp_path = slurm_site, task_image, tmp_path

    def make_provider(self) -> Provider:
        provider = SlurmProvider(ssh_config=self.site.server.config_path)
        provider.validate_profile(self.make_profile())
        return provider

    def make_profile(self) -> Profile:
        return load_catalog(self.site.catalog)[PROFILE]

    def run_resources(self, run_id: str) -> dict[str, Callable[[], None]]:
        """The run's folder on the shared file system, read from the disk (the cluster's shared_dir is local here)."""
        folder = run_folder(self.site, run_id)
        return {"run folder": lambda: shutil.rmtree(folder)} if folder.exists() else {}

    def make_request(self, profile: Profile) -> LaunchRequest:
        request = super().make_request(profile)
        item = WorkItem("lstm_text_generation", "jax")  # the task image's 600 s item: the job outlives the test
        plan = plan_on_image(self.tmp_path, self.image, request.run_id, (item,), provider="slurm", platform=PROFILE)
        return replace(request, batch=plan.spec)
