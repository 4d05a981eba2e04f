# ruff: noqa: W291  (aider ends each status line with a Markdown line break: two spaces)
"""aider's shell commands and refused writes as calls with results (real-shaped samples after the
histories of heldout42): what aider ran, what the user declined, a write aider could not make,
and a pasted line that merely opens with "!"."""

from __future__ import annotations

from evalkit.contracts.session import ToolCall
from evalkit.facts import compute_facts
from tests.support.facts import aider_session, ids_of

_HEAD = (
    "# aider chat started at 2025-05-10 15:17:26\n\n> Aider v0.83.1\n\n#### reload nginx after the change\n\n"
)

_REPLY = """Update the config, then reload Nginx:

```bash
sudo mkdir -p /srv/qbt/config
sudo cp qbtconf.txt /srv/qbt/config/qBittorrent.conf
```

```bash
cd /root/media-stack
sudo docker compose restart qbittorrent
```

"""

_RAN = """> Tokens: 5.4k sent, 435 received.  
> sudo mkdir -p /srv/qbt/config                            
sudo cp qbtconf.txt /srv/qbt/config/qBittorrent.conf  
> Run shell commands? (Y)es/(N)o/(S)kip all/(D)on't ask again [Yes]: y  
> Running sudo mkdir -p /srv/qbt/config  
> Running sudo cp qbtconf.txt /srv/qbt/config/qBittorrent.conf  
> Add command output to the chat? (Y)es/(N)o/(D)on't ask again [Yes]: y  
> Added 2 lines of output to the chat.  
"""

_DECLINED = """> cd /root/media-stack                       
    sudo docker compose restart qbittorrent  
> Run shell commands? (Y)es/(N)o/(S)kip all/(D)on't ask again [Yes]: n  

#### thanks
"""


def _session(tmp_path, text: str):
    return aider_session(tmp_path, text)


def _calls(s) -> list[str]:
    return [
        b.args.get("command", b.args.get("path"))
        for m in s.messages
        for b in m.blocks
        if isinstance(b, ToolCall)
    ]


def test_commands_aider_ran_are_calls_with_their_files_and_dirs(tmp_path):
    s = _session(tmp_path, _HEAD + _REPLY + _RAN)
    assert _calls(s) == [
        "sudo mkdir -p /srv/qbt/config",
        "sudo cp qbtconf.txt /srv/qbt/config/qBittorrent.conf",
    ]
    f = compute_facts(s)
    assert f.failures == []
    assert [x.path for x in f.files_modified] == ["/srv/qbt/config/qBittorrent.conf"]
    assert ids_of(f, "dir") == {"/srv/qbt/config"}
    # the command echo's second line is aider's status message, not the model's words
    assert not any(m.role == "assistant" and m.text.startswith("sudo cp") for m in s.messages)


def test_commands_the_user_declined_are_rejected_calls_with_no_error_and_no_dir(tmp_path):
    text = _HEAD + _REPLY + _RAN.replace("[Yes]: y  \n> Running", "[Yes]: n  \n> Skipped", 1)
    text = text.replace("> Running sudo cp qbtconf.txt /srv/qbt/config/qBittorrent.conf  \n", "") + _DECLINED
    s = _session(tmp_path, text)
    f = compute_facts(s)
    assert [(x.command, x.source) for x in f.failures] == [
        ("sudo mkdir -p /srv/qbt/config", "rejection"),
        ("sudo cp qbtconf.txt /srv/qbt/config/qBittorrent.conf", "rejection"),
        ("cd /root/media-stack", "rejection"),
        ("sudo docker compose restart qbittorrent", "rejection"),
    ]
    assert ids_of(f, "error") == set() and ids_of(f, "dir") == set()
    assert f.files_modified == []


def test_a_prompt_with_no_command_from_the_reply_gives_no_call(tmp_path):
    # aider's status lines before the prompt are not commands (the subject must be in the reply).
    text = (
        _HEAD
        + "Done.\n\n> Repo-map: using 4096 tokens, auto refresh  \n"
        + ("> Run shell command? (Y)es/(N)o/(D)on't ask again [Yes]: n  \n")
    )
    assert _calls(_session(tmp_path, text)) == []


_UNWRITABLE = """nginx/conf.d/qbt.conf
```
<<<<<<< SEARCH
    auth_basic on;
=======
>>>>>>> REPLACE
```

> Tokens: 5.4k sent, 435 received.  
> Unable to write file /home/henry/webserver/nginx/conf.d/qbt.conf after 5 attempts: [Errno 13] Permission denied: '/home/henry/webserver/nginx/conf.d/qbt.conf'  
> [Errno 13] Permission denied: '/home/henry/webserver/nginx/conf.d/qbt.conf'  
"""


def test_a_write_aider_could_not_make_is_a_failed_edit(tmp_path):
    f = compute_facts(_session(tmp_path, _HEAD + _UNWRITABLE))
    assert [x.source for x in f.failures] == ["error flag"]
    assert ids_of(f, "error") == {
        "Unable to write file /home/henry/webserver/nginx/conf.d/qbt.conf after 5 attempts: "
        "[Errno 13] Permission denied: '/home/henry/webserver/nginx/conf.d/qbt.conf'"
    }
    assert f.files_modified == []


def test_an_applied_edit_is_no_failure(tmp_path):
    text = _HEAD + _UNWRITABLE.split("> Unable")[0] + "> Applied edit to nginx/conf.d/qbt.conf  \n"
    f = compute_facts(_session(tmp_path, text))
    assert f.failures == [] and [x.path for x in f.files_modified] == ["nginx/conf.d/qbt.conf"]


def test_a_pasted_line_opening_with_a_bang_is_part_of_the_paste(tmp_path):
    text = _HEAD.replace("#### reload nginx after the change\n", "") + (
        "#### ERROR tests/test_integration.py::test_flow - Module...  \n"
        "#### !!!!!!!!!!!!!!!!!! stopping after 1 failures !!!!!!!!!!!!!!!!!!  \n"
        "#### ============ 1 error in 12.31s ============  \n\nThe module is missing.\n"
    )
    s = _session(tmp_path, text)
    assert _calls(s) == []
    assert [m.role for m in s.messages] == ["user", "assistant"]


def test_a_bang_command_as_the_whole_input_is_still_a_shell_call(tmp_path):
    text = _HEAD.replace("#### reload nginx after the change\n", "") + "#### !ls tests  \n\nOk.\n"
    assert _calls(_session(tmp_path, text)) == ["ls tests"]


_PARTIAL = """cli/invoker.ts
```typescript
<<<<<<< SEARCH
import { PoIValidator } from './PoIValidator';
=======
import { SignalScorer } from '../validators/SignalScorer';
>>>>>>> REPLACE
```

tests/poi.test.ts
```typescript
<<<<<<< SEARCH
import { PoIValidator } from '../validators/PoIValidator';
=======
import { SignalScorer } from '../validators/SignalScorer';
>>>>>>> REPLACE
```

> Tokens: 11k sent, 338 received. Cost: $0.03 message, $0.25 session.  
> # 1 SEARCH/REPLACE block failed to match!

## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in cli/invoker.ts
<<<<<<< SEARCH
import { PoIValidator } from './PoIValidator';
=======
import { SignalScorer } from '../validators/SignalScorer';
>>>>>>> REPLACE

The SEARCH section must exactly match an existing block of lines including all white space, comments, indentation, docstrings, etc

# The other 1 SEARCH/REPLACE block was applied successfully.
Don't re-send them.
Just reply with fixed versions of the block above that failed to match.  
> Commit 7f1724d refactor: update references  

The block is fixed now.
"""


def test_the_blocks_a_failed_match_report_says_applied_are_applied_edits(tmp_path):
    s = _session(tmp_path, _HEAD + _PARTIAL)
    f = compute_facts(s)
    assert [x.command for x in f.failures] == ["edit cli/invoker.ts"]
    assert [x.path for x in f.files_modified] == ["tests/poi.test.ts"]
    assert ids_of(f, "sha") == {"7f1724d"}
    # the report's tail (after its quoted block) is the report's, not the model's text
    assert not any(m.role == "assistant" and "must exactly match" in m.text for m in s.messages)


def test_a_report_whose_count_disagrees_with_the_reply_applies_nothing(tmp_path):
    text = _PARTIAL.replace("The other 1 SEARCH/REPLACE block was", "The other 3 SEARCH/REPLACE blocks were")
    f = compute_facts(_session(tmp_path, _HEAD + text))
    assert f.files_modified == []
