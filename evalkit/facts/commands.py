"""Tool-call vocabulary, re-exported: it lives in :mod:`evalkit.common.toolcalls` (neutral plumbing the
offline stand-ins read too; see that module)."""

from evalkit.common.toolcalls import (  # noqa: F401
    EDIT_TOOLS,
    EDITOR_TOOLS,
    PATH_KEYS,
    READ_TOOLS,
    SHELL_TOOLS,
    WRITE_TOOLS,
    _path_arg,
    command_of,
    files_of,
    normalize_command,
    shell_modified,
)
