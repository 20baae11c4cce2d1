"""Export and delete-my-data from the Settings page and the API."""

from __future__ import annotations

import shutil
from pathlib import Path

from storage.models import User
from storage.portable import UserData


class WebData:
    """All of one user's data, as a file or gone."""

    def __init__(self, userdata: UserData) -> None:
        self.userdata = userdata
        """Export and delete-my-data over every registered feature (the CLI's own)."""

    async def export_file(self, user: User) -> Path:
        """All the user's data and files (the zip ``lifebot export`` writes), in a file.

        The file is private and temporary: the caller deletes it (``forget_export``) once sent.
        """
        assert user.id is not None
        return await self.userdata.export_temporary(user.id)

    @staticmethod
    def forget_export(path: Path) -> None:
        """Delete a sent export and its temporary folder (blocking; a background task)."""
        shutil.rmtree(path.parent, ignore_errors=True)

    async def erase(self, user: User) -> None:
        """Delete the user and everything of theirs: rows, files, audio, caches."""
        assert user.id is not None
        await self.userdata.delete(user.id)
