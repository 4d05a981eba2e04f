"""User constraints: the rules a user (or the task prompt) sets on how the agent works.

A constraint is one sentence or clause, not the paragraph around it, so a summary that keeps the
rule can be matched against it. It is a directive about the agent's way of working rather than
its deliverable: a marked rule (prohibition, obligation, ``only`` limit, a modal with the agent
or its work as subject, an answer-form limit), or a process imperative ("run the tests again",
"finish after you are done coding") anywhere but the message's opening request. What is skipped,
and why:

- quoted material: fenced code, ``>`` quotes, indented blocks, and a pasted issue between an
  ``ISSUE:``/``<issue>`` header and the next instruction header (the rules in it are the issue
  author's, not the user's);
- questions ("does it only run on main?") and stray keywords ("Never mind!", "Don't worry");
- requirements on the code being written ("then it should be moved to …"): a modal verb counts
  only when the agent is its subject (``you``/``we``) or the sentence is an imperative;
- in a harness template's ``TIPS``/``STRATEGY`` sections, advice ("Always check the code after
  an edit"): only prohibitions and ``only`` limits count there.

The labelling rules these follow are in ``tests/fixtures/labels/README.md``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from evalkit.contracts.session import ToolCall

# Prohibitions: sentence-level markers that forbid something.
_PROHIBIT = (
    r"never|don'?t|do not|must not|mustn'?t|should not|shouldn'?t|cannot|can'?t|can not|may not|"
    r"no need to|under no circumstances|avoid|refrain from|"
    # "important not to commit until …", "be careful not to touch …": a prohibition with a lead word.
    r"(?:important|remember|careful|sure|mind)\s+not\s+to"
)
# Obligations and limits that need no subject check.
_OBLIGE = (
    r"always|make sure|be sure to|ensure that|remember to|no more than|at most|stick to|"
    r"use [\w./-]+(?: [\w./-]+)? (?:not|instead of)|prefer|"
    # Which versions the work may install: "Use the exact package versions from my requirements.txt."
    r"use (?:the |only the )?(?:exact|same|pinned) (?:package |library |dependency )?versions?"
)
# "only" limits a scope when it sits next to an action verb.
_ONLY = (
    r"only\b(?:\s+\w+){0,2}\s+(?:do|edit|editing|touch|modify|change|use|run|interact|enter|work|commit|add|"
    r"write|create|delete|read|call|install)|(?:edit|touch|modify|change|use|run|enter|create|write) only\b|"
    # "Focus only on the chats.py": where the work may go, as "only edit" does.
    r"focus only on\b|"
    # "Scope (do this and ONLY this):", "the tests and only the tests".
    r"(?P<only_what>(?:the\s+)?\w+)\s+and\s+only\s+(?P=only_what)\b"
)
# Modal verbs count when the agent (or its work: "your answer", "your changes") is the subject.
_MODAL = (
    # The agent's own sub-agents are the agent at work: "Each subagent should do a web search".
    # "you would need to add main.py to the chat first" says what the user would have to do.
    r"(?:\byou|\bwe|\byour \w+|\b(?:each|every|all|the|your|its) (?:of the )?sub-?agents?)\s+"
    r"(?:(?!would\b|could\b|might\b|may\b)\w+\s+)?"
    r"(?:must|should|are required to|is required to|shall|need to|have to|has to|not allowed to|not permitted to)\b"
    # "all the files you need to and run …": an elided verb is a permission, not a rule;
    # "we have to keep in mind that …" introduces a consideration (see _MINDFUL).
    r"(?!\s+(?:and|or)\b|\s*[,.;:!)]|\s+(?:keep|bear)\s+in\s+mind\b)"
)
# The same markers in other languages users type to agents, opening a clause (an imperative) or
# after "you": prohibitions, "only" limits on what the work touches, obligations on the agent.
# Chinese: 不要/别/请勿/禁止/切勿/不得 "don't", 只/仅 + a verb of changing or using "only …",
# 你必须/务必 "you must"; Japanese: …しないでください/…ないで "don't", …だけ/のみ "only";
# Spanish, Portuguese, French, German: no/não/ne … pas/nicht, solo/só/seulement/nur, debes/você deve/
# vous devez/du musst.
_CLAUSE_OPEN = r"(?:^|(?<=[，。；：！？,;:!?(（]))\s*"
_OTHER_LANGUAGE = (
    rf"{_CLAUSE_OPEN}(?:请|請|你|您)?(?:千万|千萬)?(?:不要|别|別|请勿|請勿|禁止|切勿|不得|不许|不准)|"
    rf"{_CLAUSE_OPEN}(?:请|請|你|您)?(?:只|仅|僅)(?:能|需|要)?\s*(?:修改|改动|改動|更改|编辑|編輯|改|动|動|使用|用|"
    r"运行|運行|执行|執行|创建|創建|删除|刪除|写|寫|安装|安裝|提交|碰|添加|增加)|"
    rf"{_CLAUSE_OPEN}(?:你|您)?(?:必须|必須|务必|務必)|"
    # Thai: ตอบ(เป็น)ภาษา… "answer in language …", คุณต้อง "you must", อย่า/ห้าม "don't", "from now on".
    r"ตอบ(?:เป็น)?ภาษา|(?:คุณ|เธอ|นาย)ต้อง|(?:^|\s)(?:อย่า(?!ง)|ห้าม)|"
    r"(?:しないでください|しないで下さい|ないでください|てはいけません|てはならない)|"
    r"(?:だけ|のみ)を?(?:変更|修正|編集|使用|実行)|"
    r"\b(?:no|nunca|jamás|não|ne|n'|nicht|niemals)\s+(?:\w+\s+)?"
    r"(?:modifiques|toques|uses|ejecutes|instales|borres|modifique|toque|execute|instale|apague|"
    r"modifiez|touchez|utilisez|exécutez|installez|supprimez|ändere|ändern|verwende|installiere|lösche)\b|"
    r"\b(?:solo|solamente|só|somente|seulement|uniquement|nur)\s+(?:\w+\s+)?"
    r"(?:modifica|modifique|edita|edite|toca|usa|modifiez|utilisez|ändere|ändern|bearbeite|verwende)\b|"
    r"\b(?:debes|tienes que|você deve|vous devez|tu dois|du musst|sie müssen)\b"
)
# A step ordered before the change, wherever it sits: "Add tests for task first before making
# changes." (an imperative: "We ran it before making changes" reports what was done).
_ORDER = r"\bfirst,? before\b|\bbefore (?:making|writing|changing) (?:any )?(?:changes|code)\b"
_ORDER_RE = re.compile(_ORDER, re.I)
_SUBJECT_START = re.compile(
    r"^(?:i|we|they|he|she|it|this|that|you)\b(?!\s+(?:must|should|need|have to)\b)", re.I
)
# Rules with no marker word: answer-form limits and the wordings the issue names.
_STATEMENT_START = re.compile(r"^(?:the|this|that|these|those|it|its|a|an|i|we|they|he|she|there)\b", re.I)
_KEYWORDLESS = (
    rf"{_ORDER}|"
    r"\bin (?:one|two|three|four|five|\d+) (?:short )?(?:paragraphs?|sentences?|words|lines|bullet points?|bullets)\b|"
    # "make the minimal, correct code changes needed", "the smallest possible set of changes" (a
    # statement about "minimal diffs" elsewhere is no rule on this work).
    r"\b(?:minimal|minimum|smallest)\b(?:,?\s+(?:possible|necessary|needed|correct|required|set\s+of|code|file))*"
    r"\s+changes?\b|\bin the background\b|"
    r"\b(?:under|fewer than|less than|at most) \d+ (?:words|lines|characters|tokens)\b|"
    # When to stop: "fix the code until it compiles", "repeat until all tests pass".
    r"\buntil\s+(?:it|they|the\s+(?:build|code|project|tests?|suite|app|checks?)|all\s+(?:the\s+)?(?:tests?|checks?))\s+"
    r"(?:compiles?|builds?|pass(?:es)?|succeeds?|is\s+(?:clean|green|passing)|are\s+(?:green|passing))\b|"
    # Version control as a step after the work: "mark the task as done and commit with a clear message".
    r"\band\s+(?:then\s+)?commit\b(?!\s+(?:message|hash|sha|id)s?\b)|"
    # Version control forbidden by "without": "git add the features, then show me a commit
    # message, without git commit and git push anything".
    r"\bwithout\s+(?:any\s+)?(?:git\s+)?(?:commit(?:ting)?|push(?:ing)?|merg(?:e|ing)|rebas(?:e|ing))\b|"
    # A length given to the agent's answer as a noun phrase: "A 2-3 sentence summary of …".
    r"\b(?:\d+|one|two|three|four|five)(?:\s*(?:-|–|to)\s*(?:\d+|two|three|four|five))?[- ]"
    r"(?:sentences?|paragraphs?|lines?|bullets?|words?)\s+(?:summary|answer|reply|response|report|explanation)\b|"
    # The answer's layout: "put them in a single table", "present it as bullet points".
    r"\b(?:put|present|show|give|format|list|summari[sz]e|answer|write)\b[^.;]{0,40}?\b(?:in|as|into)\s+(?:a\s+|one\s+)?"
    r"(?:single\s+|one\s+|markdown\s+|short\s+)?(?:table|bullet(?: point)?s?|bulleted list|numbered list)\b|"
    # Claude Code's thinking-depth keywords set the form of the agent's thinking.
    r"^(?:ultrathink|think (?:hard|harder|deeply)|megathink)\b|"
    # A plan shown before the work: "Show plan first.", "Outline your approach before coding."
    r"^(?:(?:please|now|then),?\s+)?(?:show|present|share|give|write|outline|propose|explain)\s+(?:me\s+|us\s+)?"
    r"(?:the\s+|your\s+|a\s+)?(?:plan|approach|proposal|outline)\s+(?:first|before)\b|"
    # A verbless prohibition on a kind of tool or action: "No ClMail tools.", "No new dependencies."
    r"^no\s+(?:[\w.-]+\s+){0,2}(?:tools?|commands?|packages?|librar(?:y|ies)|dependencies|network|internet|"
    r"web (?:access|search(?:es)?)|installs?|pushes|commits)\b"
)
# A standing property of all the work from now on, said in passing: "let's make it cross-browser",
# "keep it backwards compatible" (a one-off change names a thing: "make `x` an optional param").
_PROPERTY = (
    r"(?:cross-[\w-]+|(?:backwards?\s+|fully\s+)?compatible\b|[\w-]+[- ](?:safe|agnostic|free|independent|compatible)\b|"
    r"responsive|accessible|portable|offline-first|idempotent|thread-safe|deterministic|"
    # "make it work without network access", "keep it working offline": where all of it must run.
    r"(?:without|with\s+no)\s+(?:a\s+|an\s+)?(?:network|internet|web)(?:\s+access|\s+connection)?\b|offline\b)"
)
_STANDING = (
    r"^(?:(?:let'?s|please|and|also|but|so|now|then),?\s+)*(?:make|keep)\s+(?:it|this|them|everything|all of it|the code)\s+"
    rf"(?:\w+\s+(?:and\s+)?){{0,2}}{_PROPERTY}"
)
# The same property as a clause of a longer request, even one in question form ("Can you please
# read …, do a code review and while keeping it simple and dependency free (except for X) and
# compilation free, see TODOs …?"): the clause runs to the next comma or sentence mark.
_CLAUSE_TEXT = r"(?:[^,;?!.()]|\([^()]*\)|\.(?=\w))"
_STANDING_CLAUSE = re.compile(
    rf"\b(?:while|whilst)\s+(?:keeping|making)\s+(?:it|this|them|everything|the code)\s+{_CLAUSE_TEXT}*?"
    rf"{_PROPERTY}{_CLAUSE_TEXT}*",
    re.I,
)
# "Can you check further into why the 401 error could be occurring?": a question for an account
# (why, how, whether), though put as a request.
_ASKS_WHY = re.compile(r"\b(?:why|how come|whether|what|how)\b", re.I)
# A lead-in ending at a colon after a preposition ("Run it with:", "Build it using:") introduces the
# command or block below it; the directive is that block's, not a rule of its own.
_INTRO_COLON = re.compile(r"\b(?:with|using|via|by|like|as follows|this|these|the following)\s*:\s*$", re.I)
# A request put as a question ("Can you please read … and …?") asks the agent to act.
_POLITE_REQUEST = re.compile(r"^(?:(?:so|and|ok|okay|now),?\s+)?(?:can|could|would|will)\s+you\s+", re.I)
_RULE = re.compile(
    rf"\b(?:{_PROHIBIT}|{_OBLIGE}|{_ONLY})\b|{_MODAL}|{_KEYWORDLESS}|{_STANDING}|{_OTHER_LANGUAGE}", re.I
)
_MODAL_RE = re.compile(_MODAL, re.I)
# Prohibitions and obligations bind the agent when they open a clause (an imperative) or follow
# the agent as subject; "They don't look bad" and "it's always appreciated" state no rule.
_MARKER = re.compile(rf"\b(?:{_PROHIBIT}|{_OBLIGE})\b", re.I)
_CLAUSE_START = re.compile(
    r"(?:^|[,;:(!.—–\"“-]|\b(?:you|we|please|and|but|so|just|also|then|or|to|really|strictly))\s*$",
    re.I,
)
_MODAL_PROHIBIT = re.compile(r"(?:must not|mustn'?t|should not|shouldn'?t|may not)", re.I)
_PROHIBIT_OR_ONLY = re.compile(rf"\b(?:{_PROHIBIT}|{_ONLY})\b", re.I)
# Sentence-initial imperatives that state a standing rule ("Keep …", "Use X not Y", "Only …").
# A quality of the text the agent writes ("Keep it factual and grounded." in a request for a
# document): a requirement on the deliverable, not on how the agent works.
_TEXT_QUALITY = (
    r"(?:factual|grounded|accurate|objective|neutral|balanced|honest|precise|readable|professional)\b"
)
# The agent's own tools as harnesses name them (case-sensitive: "use bash for the script" is code).
_AGENT_TOOL = (
    r"(?-i:WebSearch|WebFetch|Grep|Glob|Bash|TodoWrite|NotebookEdit|SendMessage|web_fetch|google_web_search|"
    r"browser_action|use_mcp_tool|search_files|list_files|read_file)"
)
# Languages an answer is asked in ("Always respond in Thai language.").
_LANGUAGE = (
    r"(?:english|thai|chinese|mandarin|cantonese|japanese|korean|vietnamese|indonesian|malay|hindi|bengali|urdu|"
    r"arabic|persian|farsi|hebrew|turkish|russian|ukrainian|polish|czech|slovak|german|dutch|french|spanish|"
    r"portuguese|italian|greek|swedish|norwegian|danish|finnish|hungarian|romanian|tagalog|swahili)\b"
)
_IMPERATIVE = re.compile(
    # "So I'd like to keep it the same 3 simple files": asking the agent, as an imperative does.
    r"^(?:(?:(?:so|and|but|also)\s+)?(?:(?:i|we)(?:'d|\s+would)\s+like\s+(?:you\s+)?to|i\s+want\s+you\s+to|"
    r"(?:can|could|would|will)\s+you)\s+)?"
    # "Keep in mind that we have a dedicated script …" states a consideration.
    # "Only 5 main components have tests": "only" before a number counts something, a statement.
    rf"(?:please\s+)?(?:keep(?!\s+(?:it|this|the\s+\w+)\s+{_TEXT_QUALITY}|\s+in\s+mind\b)|use \S+ (?:not|instead of)|only(?!\s+\d)|"
    # Where the agent may work: "Stay in your worktree." ("stay in sync" is no place).
    r"stay\s+(?:in|inside|within)\s+(?:your|the|this)\s+(?:own\s+)?(?:worktree|work\s*tree|directory|folder|repo|"
    r"repository|branch|sandbox|workspace|project)|"
    # Which of the agent's own tools it works with ("Use WebSearch / WebFetch to find …"), by
    # their names as the harness spells them; "use BeautifulSoup to find the links" is code.
    rf"use\s+(?:the\s+)?{_AGENT_TOOL}(?:\s*(?:/|,|and|or)\s*{_AGENT_TOOL})*(?=[\s.,;:]|$)|"
    # Tools to study with before the task: "use app tools to go to … to understand its capabilities"
    # ("Use the web browser tool to navigate to X" alone is the task).
    r"use\s+(?:the\s+|your\s+|its\s+)?(?:[\w-]+\s+){0,2}(?:tools?|commands?)\s+to\b[^.;]{0,160}?\bto\s+"
    r"(?:understand|learn|explore|study|get familiar|familiari[sz]e)|"
    # Which package or service the work uses for a purpose: "Use lucide-react for icons.", "For
    # images, use unsplash." (a name in the code, "use localStorage for storage", is _CODE_USE, and
    # "use bash for the install script" names what a file of the deliverable is written in).
    r"(?:for\s+(?:\w+\s+){0,3}?\w+,\s*)?use\s+(?!(?:it|this|that|them|these|those|the|a|an|one|some|any|all|your|"
    r"my|our|its|their|caution|care|common)\b)[a-z][a-z0-9]*(?:[-.][a-z0-9]+)*(?=\s+for\s+(?!(?:the|a|an|this|that|these|those|its|their|your|our|my)\b)|\s*,|\.?\s*$)|"
    # The thoroughness or length of the agent's answer and thinking: "Be thorough.", "Be concise.".
    r"be\s+(?:very\s+|extremely\s+|as\s+)?(?:thorough|exhaustive|concise|brief|succinct|systematic|meticulous)|"
    # The language and form of the answer: "Respond ONLY in Thai from now on.", "Return ONLY the
    # fixed code — no explanation:", "Show every single MCP tool call, the reasoning, …".
    rf"(?:stop\s+)?(?:respond|reply|answer|write|speak|talk|communicate)(?:ing)?\s+(?:to\s+me\s+)?(?:only\s+|always\s+|exclusively\s+)?"
    rf"(?:in|using)\s+(?:{_LANGUAGE})|"
    r"(?:return|output|reply\s+with|respond\s+with|answer\s+with|give\s+me|print|send)\s+only\b|"
    r"(?:show|display|print|log|include|explain)\s+(?:me\s+)?(?:every|all|each)?\s*(?:single\s+)?(?:of\s+(?:the|your)\s+)?"
    r"(?:[\w-]+\s+)?(?:tool\s+calls?|reasoning|thinking|thought\s+process)|"
    # The order in which it works through the material: "Go file by file, line by line.".
    r"(?:go|work|proceed)\s+(?:through\s+(?:it|them|the\s+\w+)\s+)?(?P<by_unit>\w+)\s+by\s+(?P=by_unit)|"
    # The form of the answer: sources to cite ("Provide a clear answer with sources.").
    r"(?:provide|give|answer|reply|respond|return)\b[^.;]*?\bwith\s+(?:\w+\s+)?(?:sources|citations|references)|"
    r"(?:cite|include|list|add)\s+(?:\w+\s+)?(?:sources|citations|references))\b",
    re.I,
)
# Imperatives about the agent's way of working, as opposed to the deliverable: verbs of running,
# checking, ending and thinking about its own process. Verbs that make or change the artefact
# (fix, add, create, write, edit, use, make, implement) or produce the answer (summarize, explain,
# list, report) name the task instead and are not here; a rule phrased with them needs one of the
# markers above.
_PROCESS_VERB = (
    r"(?:re-?)?(?:run|execute|test|verify|confirm|check|review|read|finish|stop|end|exit|quit|wait|"
    # Which tools to work with, past the opening request: "use the browser tools to check …".
    r"use\s+(?:the\s+|your\s+|its\s+)?(?:[\w-]+\s+){0,2}(?:tools?|commands?)(?=\s+(?:to|for|when|instead)\b)|"
    # Studying the code before changing it ("Analyze the current command patterns").
    r"analy[sz]e|examine|inspect|explore|study|investigate|"
    # A file the user points the agent at with an @-mention, to read and follow: "Reference
    # @.bob/skills/build-mcp-server.md.", "See @docs/style.md".
    r"(?:reference|consult|see|follow|use)(?=\s+@[\w.])|"
    # Reading before writing: "Look eg. at the transactionService to see how we did it", "Have a
    # look at that and enter the appropriate command."
    r"look(?:\s+(?:e\.?g\.?|for example))?\s+(?:at|into|over|through)\b|(?:have|take)\s+a\s+(?:quick\s+|closer\s+)?look\b|"
    r"submit|commit|push|ask|think|repeat|follow|proceed|continue|work|lint|pull(?!\s+requests?\b)|fetch|stash|"
    # Research before the task ("First, do a web search to understand …"); in an investigation
    # the search is the task itself (see _INVESTIGATION).
    r"(?<!re)(?<!re-)search|look up|(?:do|perform|run) (?:a |an )?(?:quick |web |online |internet )?(?:search|research|lookup)|"
    # Which agents do the work: an orchestrator handing it to its teammates or sub-agents ("hand
    # over this research to teammates", "have each teammate create a worktree").
    r"(?:hand|pass|farm)\s+(?:over|off|out)(?=\s[^,.;]{0,80}?\bto\s+(?:the\s+|your\s+|its\s+|\w+\s+)?"
    r"(?:teammates?|sub-?agents?|agents?|workers?)\b)|delegate(?=\s)|"
    r"have(?=\s+(?:each|every|all|the|your|its)\s+(?:of\s+(?:the|your|its)\s+)?(?:\w+\s+)?"
    r"(?:teammates?|sub-?agents?|agents?|workers?)\b)|"
    # Version control on a branch is process ("Merge master into your branch", "Create a branch named
    # `bob/x`"); merging code is not.
    r"(?:create|make|cut|open|start)\s+(?:a\s+|the\s+)?(?:new\s+)?(?:git\s+)?branch\b|"
    r"(?:merge|rebase)(?=\s+(?:(?:onto|from)\s+)?(?:the\s+)?(?:latest\s+)?(?:master|main|develop|origin/\S+|upstream\S*|\S+\s+branch)\b))"
)
_DIRECTIVE_LEAD = (
    # A file named before the imperative that acts on it: '"LM Studio configuration.md" read this'.
    r"^(?:(?:\"[^\"]{1,120}\"|`[^`]{1,120}`)\s*[,:—–-]?\s*(?=\w+\s+(?:this|it|that|them)\b))?"
    r"(?:(?:please|also|then|now|first|finally|next|and|so),?\s+)*"
    # A request put as a question asks the agent to act: "Could you please run the tests again?".
    r"(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?)?"
    # A short label before a colon: "Now, the twist: have each teammate …" (with its article, so
    # "Bug: read fails on empty files" is no imperative).
    r"(?:the\s+[a-z]+(?:\s+[a-z]+)?:\s+)?"
    r"(?:(?:carefully|always|just|again|thoroughly|only)\s+)?"
)
_DIRECTIVE = re.compile(
    # A process verb may follow another imperative it is coordinated with ("Find and run …").
    rf"{_DIRECTIVE_LEAD}(?:[a-z]+\s+(?:and|&)\s+)?{_PROCESS_VERB}(?=\s|[.!,;:]?$)(?!\s+(?:out|into)\b)"
    # "Test infrastructure needs improvement": the verb is a noun, the subject of a statement.
    r"(?!\s+[\w-]+\s+(?:needs|lacks)\b)"
    # "Test de call_llm (Happy Path): Mockea …": a label naming a test to write, an item of the task.
    r"(?!\s+(?:de|del|of)\s+[^:]{1,60}:)",
    re.I,
)
# Any other imperative is a process step when its purpose is to check the work, not to deliver it:
# "Create a script to reproduce the error", "Write tests to check the correctness …" (the script
# and the tests are the agent's scaffolding; "Edit the source to resolve the issue" is the task).
_CHECK_PURPOSE = re.compile(
    # A unit of the code that checks at run time ("Add a helper function to check job health …") is
    # the deliverable, not the agent's scaffolding.
    rf"{_DIRECTIVE_LEAD}(?:create|write|add|build|make|set up|prepare)\b"
    r"(?!\s+(?:a|an|the|new|\s)*(?:helper\s+|utility\s+|private\s+|static\s+)?(?:function|method|class|field|"
    r"endpoint|component|hook|property|column|validator|middleware|decorator)s?\b)"
    r"[^.;:]{0,80}?\bto\s+"
    r"(?:reproduce|confirm|check|verify|test|validate|make sure|ensure|see whether|see if|debug)\b",
    re.I,
)
# Opening requests that make checking the deliverable itself: a sub-agent sent to investigate
# is given a list of things to check, and those steps are its task, not rules on how it works.
_INVESTIGATION = re.compile(
    # The requester's need to know ("I need to understand the project structure … Please: 1. Check …").
    r"^(?:(?:i|we)\s+(?:need|want|would like|'d like)\s+to\s+(?:understand|know|learn|find out|figure out)\b|"
    r"help me\s+(?:understand|find out|figure out)\b)|"
    r"^(?:please\s+)?(?:investigate|research|review|audit|analy[sz]e|examine|explore|inspect|"
    r"check|look into|look up|look at|look for|look through|find out|find where|find which|identify|determine|"
    r"figure out|understand|trace|diagnose|survey|assess|search|explain|describe|"
    # An account of what is there is the deliverable: "Give me a comprehensive overview of …".
    r"(?:give|provide|write)\s+(?:me\s+|us\s+)?(?:a|an)\s+(?:\w+\s+){0,2}(?:overview|summary|explanation|description|walkthrough)|"
    r"(?:do|perform|run) (?:a |an )?(?:quick |web |online |internet )?(?:search|research|lookup))\b",
    re.I,
)
# An investigation asks only to find out: "Investigate X and make it deterministic" is a change.
_CHANGE_TOO = re.compile(
    r"\b(?:and|then)\s+(?:\w+\s+)?(?:fix|make|change|update|implement|add|remove|refactor|rewrite|patch|"
    # "Analyze the CLI and create a specification": the document to write is the task, and the
    # reading and analysing before it are how the agent works.
    r"resolve|correct|create|write|draft|produce|prepare|generate|document|design|propose)\b",
    re.I,
)
_CHECK_VERB = re.compile(
    rf"{_DIRECTIVE_LEAD}(?:[a-z]+\s+(?:and|&)\s+)?(?:re-?)?(?:check|verify|review|read|confirm|look|examine|inspect|search|"
    r"analy[sz]e|explore|study|investigate|"
    r"(?:do|perform|run) (?:a |an )?(?:quick |web |online |internet )?(?:search|research|lookup))\b"
    # "check with me before …" asks the user, it is not an item of the investigation.
    r"(?!\s+(?:with|in with)\s+(?:me|us|the user)\b)",
    re.I,
)
_CHECK_AND_DELIVER = re.compile(r"\band\s+(?:then\s+)?(?:add|create|write|implement|fix|build)\b", re.I)
# A sentence that introduces the list below it ("Follow these steps to resolve the issue:") is
# its header: the steps are read one by one, the header itself states nothing.
_LIST_HEADER = re.compile(
    r"\b(?:these|the following|below|as follows)\b[^:]*:\s*$",
    re.I,
)
# A time or condition on the agent's own progress before a directive ("When you think you have
# fixed it, run …", "Once you are done, please …"): the directive is what follows the comma.
_FRAME = re.compile(
    r"^(?:when|once|after|before|as soon as|if|whenever|while)\b[^,]{3,160},\s*|"
    # Without the comma: "before providing the proposal check the existing implementation".
    r"^(?:before|after)\s+\w+ing\b(?:[^,.;:]|(?<=\d)\.(?=\d)){0,120}?\s+(?=(?:re-?)?(?:check|run|read|review|verify|test|look|ask|wait)\b)",
    re.I,
)
# A step ordered before or after the deliverable names the deliverable in its frame, so even as a
# message's opening it is a rule on how to work, not the request.
_ORDER_FRAME = re.compile(r"^(?:before|after)\s+(?:\w+ing|you|we)\b", re.I)
# A reading step joined to the action it informs ("ok look at qbtconf.txt and make the changes
# needed", "look at the output of docker ps and use that output to …") orders the work even as a
# turn's opening; alone ("ok take a look at X") or joined to an account ("… and tell me …") it is
# the request. A retry with another command or tool ("Try that write again but with sudo, or
# check …") says how the agent is to work.
_READ_THEN_ACT = re.compile(
    r"^(?!.*\band\s+(?:then\s+)?(?:tell|explain|describe|summari[sz]e|report|compare|let\s+me|show\s+me|give\s+me))"
    r"(?:[^;]{0,40};\s*)?(?:(?:ok|okay|so|now|then|please|first),?\s+)*"
    r"(?:look\s+(?:at|over|through)|read|(?:have|take)\s+a\s+look\s+at)\b(?:[^.;]|\.(?=\w)){1,160}?\band\s+(?:then\s+)?"
    # (an account asked for after the reading makes it an investigation; "tellme": words run together)
    r"[a-z]+\b|"
    r"^(?:(?:ok|okay|so|now|please),?\s+)*try\s+(?:that|it|this|the\s+\w+)(?:\s+\w+)?\s+again,?\s+(?:but\s+)?"
    r"(?:with|using|via|through)\s+\w+",
    re.I,
)
# A bare order to stop is never the deliverable, even when it is the whole message ("Finish
# please"); "Finish the parser" names the task.
_BARE_STOP = re.compile(
    r"^(?:please\s+)?(?:finish|stop|end|exit|quit|wrap up)(?:\s+(?:please|now|here|there|for now))*\s*[.!]*$",
    re.I,
)
# What the text the agent writes may hold ("Do not invent features.", "don't make up quotes" in a
# request for a document): a requirement on the deliverable's content, not on how the agent works.
_CONTENT_FIDELITY = re.compile(
    r"^(?:please\s+)?(?:do not|don'?t|never)\s+(?:invent|fabricate|make up|speculate(?:\s+about)?|hallucinate|"
    r"embellish|exaggerate)\b",
    re.I,
)
# A request for a document ("Create an AGENTS.md file for this project", "Write a README"): then
# "Keep it very concise since …" sets the length of that document, the deliverable, not of the
# agent's answer.
_DOCUMENT_REQUEST = re.compile(
    # "Audit and revise PROJECT_SUMMARY.md for accuracy.": a document to change is one to write.
    r"^(?:please\s+)?(?:[a-z]+\s+and\s+)?(?:create|write|draft|generate|produce|prepare|compose|revise|rewrite|"
    r"update|polish|proofread)\b[^.?!]*?"
    r"(?:\b[\w-]+\.(?:md|txt|rst|adoc)\b|\b(?:readme|document|documentation|doc|report|guide|spec|specification|"
    r"changelog|article|blog\s+post|post|email|letter)\b)",
    re.I,
)
# In a request for a document, what its text keeps or loses is the deliverable: "Keep the project
# sounding strong.", "Do not remove useful sections; just make the wording accurate."
_DOCUMENT_CONTENT = re.compile(
    r"^(?:please\s+)?(?:keep\s+the\s+(?:project|document|summary|tone|wording|text|writing)\b|"
    r"(?:do\s+not|don'?t|never)\s+(?:remove|delete|drop|cut)\s+(?:any\s+)?(?:\w+\s+)?"
    r"(?:sections?|headings?|paragraphs?|content|wording|details?)\b)",
    re.I,
)
_KEEP_IT = re.compile(r"^(?:please\s+)?keep\s+it\b", re.I)
# "Keep the MVP functional and simple.", "Keep the same documentation structure.": a property of a
# named part of the deliverable (the task), where "keep it/everything simple" sets one for all the
# work and "keep the changes minimal", "keep your answer short" bound the work and the answer.
_KEEP_THING = re.compile(
    r"^(?:please\s+)?keep\s+(?:the|its|their)\s+(?:same\s+|existing\s+|current\s+)?"
    r"(?!(?:changes?|diffs?|edits?|commits?|scope|footprint|notes?|answers?|repl(?:y|ies)|responses?|"
    r"summar(?:y|ies)|explanations?|output|tests?|build|ci|branch(?:es)?)\b)[\w-]+(?:\s+[\w-]+)?\s+"
    r"(?:(?:functional|simple|clean|lean|lightweight|readable|modular|consistent)\b(?:\s+and\s+\w+)?|"
    r"(?:structure|format|layout|style|design|pattern|naming|architecture)\b)\s*[.!]?$",
    re.I,
)
_STRAY = re.compile(
    r"^(?:never mind|nevermind|don'?t worry|no worries|don'?t know|not sure|no need to worry|"
    r"don'?t bother|always happy|i (?:don'?t|can'?t|cannot))\b",
    re.I,
)
# "Remember, …", "Important: …", "Note that …" lead in to the rule; "important not to …" and
# "remember to …" are the rule itself.
_LEAD_IN = re.compile(
    r"^(?:(?:remember|note(?: however)?|important|n\.?b\.?)\s*[,:!-]\s*|(?:please\s+)?note(?: however)?(?: that)?\s+)+",
    re.I,
)
_THINKING = re.compile(r"^(?:ultrathink|think (?:hard|harder|deeply)|megathink)\b", re.I)
# Headers that open quoted material (a pasted issue) and those that end it.
# A CTF template quotes the challenge author's description ("… worth 100 points. The description
# is:\nNever forget the people's champ.\nFiles included in the challenge: …"), as an issue is quoted.
_QUOTE_OPEN = re.compile(
    r"^\s*(?:ISSUE:|<(?:issue|issue_description|pr_description|problem_statement)>)\s*$|^.*\bThe description is:\s*$",
    re.I,
)
_QUOTE_CLOSE = re.compile(
    r"^\s*(?:INSTRUCTIONS:|</(?:issue|issue_description|pr_description|problem_statement)>|IMPORTANT:|"
    r"Files included in the challenge:)",
    re.I,
)
_ADVICE_HEADER = re.compile(r"^\s*(?:[A-Z ]*\bTIPS|STRATEGY|HINTS)\s*:\s*$")
_SECTION_HEADER = re.compile(r"^\s*[A-Z][A-Z ]{3,}:\s*$")
# Sentences end at . ! ? before a capital; in all-lower-case typing ("revise proposal. put them in
# a table") also before a lower-case word when the period closes a word of 3+ letters (not "e.g.").
# Chinese and Japanese sentences end at 。！？ with no space after them.
_SENTENCE_END = re.compile(
    r"(?<=[.!?])\s+(?=[A-Z*\"'`(\[])|(?<=[a-z]{3}[.!?])\s+(?=[a-z])|(?<=[。！？])\s*(?=\S)|"
    # Thai writes no sentence mark: a space between Thai words ends a clause.
    r"(?<=[\u0e00-\u0e7f!?.])\s+(?=[\u0e00-\u0e7f])"
)
# The words of a slash command or a CLI message argument are the user's: '/instructions "Always
# respond in Thai."', 'aider --model x --message "Respond ONLY in Thai."'.
_COMMAND_QUOTE = re.compile(r"^(?:/[\w-]+|\S*aider\b[^\"“]*?\s--?(?:message|msg|m))\s+[\"“]")
# A list introduced as what to deliver ("Objectives:", "Now audit the overall structure and
# provide:"): its items ("Verify ESM compliance", "Confirm ESM compliance across all files") are
# the task, as an investigation's steps are; a marked rule among them still counts.
_DELIVERABLES = re.compile(
    r"(?:^(?:objectives?|goals?|tasks?|deliverables?|expected\s+output|acceptance\s+criteria)|"
    r"\b(?:provide|deliver|produce|return|give\s+me|include)|^(?:i|we)\s+(?:want|need|would\s+like|'d\s+like))\s*:\s*$",
    re.I,
)
# "Task:" on a line of its own heads the request: the sentence after it is the opening, as a
# message's first sentence is (the rules above it, "IMPORTANT GIT RULES: …", come first); a
# numbered list under it is a list of steps, read one by one.
_TASK_HEADER = re.compile(r"^(?:(?:the|my|your)\s+)?(?:task|request|assignment)\s*:\s*$", re.I)
_LIST_MARK = re.compile(r"^(?:[-*•]\s+|\d+[.)]\s+|#+\s+)")
_ITEM_MARK = re.compile(r"^(?:[-*•]\s+|\d+[.)]\s+)")


# A harness's task template (SWE-agent's INSTRUCTIONS, an OpenHands/SWE-bench issue prompt): its
# numbered workflow ("Follow these steps to resolve the issue: 1. … 2. …") is advice like its TIPS.
_TEMPLATE = re.compile(
    r"^\s*(?:INSTRUCTIONS:|ISSUE:|<(?:issue|issue_description|pr_description|problem_statement)>)\s*$",
    re.M | re.I,
)
_WORKFLOW_HEADER = re.compile(r"\b(?:follow|take|complete|go through)\s+these\s+steps\b[^:]*:\s*$", re.I)
# In advice, a prohibition still binds when it names what the environment cannot take ("DO NOT run
# any command that produces binary output!"); hedged strategy does not ("Try to AVOID brute force",
# "don't just use the scroll_down command multiple times").
_HEDGED = re.compile(
    r"^(?:please\s+)?try to\b|\b(?:don'?t|do not)\s+just\b|\b(?:if possible|might|it'?s a good idea|consider)\b",
    re.I,
)
# "we don't control the process", "I can't see it": the speaker states a fact, not a prohibition.
_STATED = re.compile(
    r"\b(?:we|i)\s+(?:don'?t|do not|can'?t|cannot)\s+(?:control|have|know|see|think|understand|care|own|get|"
    r"want|like|believe|mind|remember)\b",
    re.I,
)


# Text a harness or IDE wraps around the user's words (Claude Code's IDE integration, Cline's
# environment details), and the comments and checklists of a pasted template (a PR template's
# "<!-- Describe your changes -->", "- [ ] I have run the tests"): none of it is the user's rule.
_INJECTED = re.compile(
    r"<(ide_opened_file|ide_selection|ide_diagnostics|system-reminder|environment_details|workspace_diagnostics)>"
    r".*?(?:</\1>|\Z)|<!--.*?(?:-->|\Z)",
    re.S,
)
_CHECKBOX = re.compile(r"^\s*[-*]\s+\[[ xX]\]\s")
# A line that opens with a tool's error label is pasted output ("✖ ERROR: Error: Cannot find
# module …. Please verify that the package.json has a valid "main" entry"), the tool's words.
_PASTED_ERROR = re.compile(
    r"^(?:[✖✗×❌]\s*)?(?:ERROR|Error|error|FATAL|[A-Z]\w*Error|npm ERR!)(?:\s*\[[\w-]+\])?:\s"
)


# A terminal's echo of an input after aider's mode prompt ('ask> "…"', 'architect> …') is a copy of
# the screen, pasted or logged, as a "$ " shell line is.
_PROMPT_ECHO = re.compile(r"^(?:ask|code|architect|context|help|multi)>\s")


# "# WARNING: This code is intentionally insecure. DO NOT use in production.": a source comment
# of pasted code (a Markdown heading is a topic, never a "WARNING:" or "TODO:" label).
_CODE_COMMENT = re.compile(r"^(?:#|//)\s*(?:WARNING|TODO|FIXME|XXX|HACK)\b\s*:")


def _candidate_lines(text: str) -> Iterator[tuple[str, bool]]:
    """(line, in_advice_section) for each line that is the user's own words."""
    fenced = quoted = advice = False
    template = bool(_TEMPLATE.search(text))
    if "<" in text:
        text = _INJECTED.sub("", text)
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        if _QUOTE_OPEN.match(line):
            quoted = True
            continue
        if quoted:
            if not _QUOTE_CLOSE.match(line):
                continue
            quoted = False
        if _ADVICE_HEADER.match(line):
            advice = True
            continue
        if _SECTION_HEADER.match(line) or _QUOTE_CLOSE.match(line):
            advice = False
        stripped = line.strip()
        if template and _WORKFLOW_HEADER.search(stripped):
            advice = True  # the steps below, and what follows them up to the next section
            continue
        # Quotes, pasted shell sessions, pytest's "E   " lines and code or log blocks indented
        # past a list item's continuation are not instructions (an indented "# …" is a code
        # comment: Markdown headings are not indented).
        if (
            not stripped
            or _CHECKBOX.match(line)
            or _PASTED_ERROR.match(stripped)
            or stripped.startswith((">", "$ ", "E   "))
            or _PROMPT_ECHO.match(stripped)
            or _CODE_COMMENT.match(stripped)
            or raw.startswith("\t")
            or (raw.startswith("    ") and not _ITEM_MARK.match(stripped))
        ):
            continue
        yield stripped, advice


# A modal inside an embedded question states no obligation ("Determine if we need to …").
_EMBEDDED = re.compile(r"\b(?:if|whether|what|how|why|which)\s+(?:\w+\s+){0,3}$", re.I)
# "use X" where X is a name in the code (CamelCase, snake_case, a call) is a change to the code:
# "don't use `IgnorantTemporaryDirectory` use GitTemporaryDirectory".
_CODE_NAME = r"`?(?:[A-Za-z]*[a-z][A-Z]\w*|[A-Z]\w*[a-z]\w*[A-Z]\w*|[a-z]\w*_\w+|[\w.]+\(\))`?"
_CODE_USE = re.compile(
    # Case matters for the name, not for the words around it.
    rf"^(?i:(?:please\s+)?(?:don'?t|do not|never|avoid)\s+(?:using|use)\s+){_CODE_NAME}(?!\s+(?i:command|tool)s?\b)"
    rf"|^(?i:(?:please\s+)?use\s+){_CODE_NAME}\s*,?\s+(?i:not|instead of)\b"
    # "You should use localStorage for storage": the code's own API for a feature.
    rf"|^(?i:(?:you\s+(?:should|must|need\s+to|have\s+to)\s+|please\s+)?use\s+){_CODE_NAME}\s+(?i:for|as|to)\b"
)


# "Make sure they are equivalent", "ensure that sync logic will work": a requirement on the code;
# "make sure to run …", "make sure you …", "make sure the tests pass" bind the agent's work.
_ENSURE = re.compile(r"(?:make sure|ensure that)$", re.I)
_ENSURE_AGENT = re.compile(
    r"\s+(?:that\s+)?(?:to|you|we|i|not|never|nothing|(?:all\s+)?(?:the\s+)?(?:tests?|linters?|build|ci)\b)",
    re.I,
)


# "make sure the export keeps working for the v1 callers": a standing property of all the work
# (the rules' "keep it backwards compatible"), not a one-off requirement on the deliverable.
# The agent named later in the sentence ("… has a test file next to it before you move on") makes
# it a rule on the agent's work too.
_STANDING_AFTER = re.compile(r"\b(?:keeps?|stays?|remains?|continues? to|still|you|your)\b", re.I)
# "execute them to make sure the patch covers …": a check's purpose, so the sentence is a step.
_PURPOSE_TO = re.compile(
    r"\b(?!(?:need|needs|have|has|had|want|wants|is|are|be|going|got|please|important|remember|you)\b)\w+\s+to\s*$",
    re.I,
)


# "rig up the chatbot-ui to use X instead of Y" gives the code's behaviour: a tool choice binds
# the agent only when "to" follows the agent or a word of obligation ("I want you to use …").
_USE_INSTEAD = re.compile(r"use\b", re.I)
_AGENT_TO = re.compile(
    r"\b(?:you|me|us|need|needs|have|has|had|want|wants|remember|sure|going|important|careful|able|try|"
    r"trying|got|supposed|required|allowed|asked|ask|like|prefer|is|are|be)\s+to\s*$|^\s*to\s*$",
    re.I,
)


# "we have to keep in mind that we want to stick to the dotenv way": what follows states a
# consideration about the code; only a prohibition there still binds the agent.
_MINDFUL = re.compile(r"\b(?:keep|bear)\s+in\s+mind\b", re.I)
_PROHIBIT_RE = re.compile(rf"\b(?:{_PROHIBIT})\b", re.I)


# "next we need to increase the score when …", "we have to make the necessary adaption to the
# Service", "You need to build desktop-first webapps": the agent (with the user) as subject, a change
# to the code or an artefact to build as the verb: the task, not a rule on how to work.
_WE_CHANGE = re.compile(
    r"\s+(?:make|increase|decrease|add|implement|create|build|fix|change|update|adapt|refactor|rewrite|"
    r"write|move|rename|remove|replace|extend|support|handle|introduce)\b",
    re.I,
)


_BREAK = re.compile(r"\s*(?:break|破坏|破壞)", re.I)
_PROHIBIT_ANY = re.compile(rf"(?:{_PROHIBIT}|{_OTHER_LANGUAGE})", re.I)


def _rule_in(text: str) -> re.Match | None:
    """The first marker in ``text`` that states a rule for the agent."""
    for m in _RULE.finditer(text):
        before = text[: m.start()]
        if _ORDER_RE.fullmatch(m.group(0)) and _SUBJECT_START.match(text):
            continue
        # "The loop runs until it succeeds." states what the code does.
        if m.group(0).lower().startswith(("until", "and")) and _STATEMENT_START.match(text):
            continue
        # (a modal's subject and verb come before its "not": "… that you must not push")
        if _MINDFUL.search(before) and not _PROHIBIT_RE.search(text[m.start() : m.end() + 5]):
            continue
        if _USE_INSTEAD.match(m.group(0)) and re.search(r"\bto\s*$", before) and not _AGENT_TO.search(before):
            continue
        if (
            _ENSURE.match(m.group(0))
            and not _ENSURE_AGENT.match(text[m.end() :])
            and not _PURPOSE_TO.search(before)
            and not _STANDING_AFTER.search(text[m.end() :])
        ):
            continue
        if _MODAL_RE.match(m.group(0)) and _EMBEDDED.search(before + " "):
            continue
        # "do not break the existing features" asks for the code's behaviour (the task).
        if _BREAK.match(text[m.end() :]) and _PROHIBIT_ANY.fullmatch(m.group(0).strip()):
            continue
        if (
            _MODAL_RE.match(m.group(0))
            and re.match(r"(?:we|you)\b", m.group(0), re.I)
            and _WE_CHANGE.match(text[m.end() :])
            # "Ignore all errors, since we have to adapt them later": the reason of another rule.
            and not re.search(r"\b(?:since|because)\s*$", before)
        ):
            continue
        # "a username that passes validation but should not": a modal prohibition needs the agent
        # (or nothing: "Should not touch X.") before it, not a subject of the code joined by "but".
        if _MODAL_PROHIBIT.fullmatch(m.group(0)) and re.search(r"\b(?:but|and|or)\s*$", before):
            continue
        if not _MARKER.fullmatch(m.group(0)) or _CLAUSE_START.search(before):
            return m
    return _IMPERATIVE.match(text)


_OFFER = re.compile(r"^(?:if|when(?:ever)?)\s+you\s+(?:need|want|would like|'d like|like|wish)\b", re.I)


_CODE_STATE = re.compile(
    r"\b(?:is|are)\s+(?:(?:properly|correctly)\s+[a-z]+(?:\s+up)?|correct|being\s+(?:set|called|rendered))\s*[.!]?$",
    re.I,
)


def _directive(sentence: str, investigation: bool = False) -> bool:
    """A process imperative addressed to the agent, possibly after a time or condition frame.
    When the request is an investigation, an imperative to check or read is the task itself."""
    # "If you need more context, have a look at git diff": an offer for when the agent wants it.
    if _OFFER.match(sentence):
        return False
    s = _FRAME.sub("", sentence, count=1)
    if investigation and _CHECK_VERB.match(s):
        return False
    # "Check the existing tests and add the missing ones": a check joined to the deliverable is
    # the request itself.
    if _CHECK_VERB.match(s) and _CHECK_AND_DELIVER.search(s):
        return False
    # "Verify the onClick handler is properly connected": a check of a state of the code is a
    # debugging step of the task, not a rule on how the agent works.
    if _CHECK_VERB.match(s) and _CODE_STATE.search(s):
        return False
    return bool(_DIRECTIVE.match(s) or _CHECK_PURPOSE.match(s))


def _directive_clause(sentence: str) -> str:
    """A long sentence that chains a process step with the task by commas ("Now, hand over this
    research to teammates, have each write a work/ document …, then …"): the directive is its
    first clause (as ``_clauses`` keeps a rule's clause before ", and" and the task). When the
    next clause is a step or a rule too, the sentence is one list of steps and stays whole."""
    if len(sentence.split()) <= 20:
        return sentence
    frame = _FRAME.match(sentence)
    start = frame.end() if frame else 0
    m = _DIRECTIVE.match(sentence[start:]) or _CHECK_PURPOSE.match(sentence[start:])
    cut = sentence.find(", ", start + m.end()) if m else -1
    if cut < 0:
        return sentence
    nxt = sentence[cut + 2 :].split(", ", 1)[0]
    # A reason the step gives ("…, because the remaining tests should do it in the same way") is
    # part of that step.
    reason = re.match(r"(?:because|since|so that|as)\b", nxt, re.I)
    return sentence if reason or _rule_in(nxt) or _directive(nxt) else sentence[:cut]


# A rule drawn as a consequence of a statement ("the environment is set up, so you don't need to
# install packages"): the statement before it is a reason, not part of the rule.
_CONSEQUENCE = re.compile(r"^(?:and\s+)?(?:so|therefore|thus|hence)\s+", re.I)


def _clauses(sentence: str) -> list[str]:
    """A sentence's rule-bearing clause. A permission or a task after the rule is cut ("you
    cannot use X, but you can write scripts"); a rule after a permission keeps it ("You can
    look, but don't modify them": "them" needs the first half). A long condition before the
    rule is cut too."""
    parts = re.split(r",\s+but\s+", sentence)
    if len(parts) > 1 and _rule_in(parts[0]):
        sentence = parts[0]
    # A rule joined by ", and" to what is neither a rule nor a process step is joined to the
    # task ("run the agents in the background, and while we wait … write your own poem").
    parts = re.split(r",\s+and\s+", sentence)
    # "… of e.g. todos, what you did, issues, plans, and things to keep in mind": the last item
    # of a serial list, no clause of its own.
    serial = len(parts) == 2 and ", " in parts[0] and "," not in parts[1] and len(parts[1].split()) <= 6
    if (
        len(parts) > 1
        and not serial
        and _rule_in(parts[0])
        and not any(_rule_in(p) or _directive(p) for p in parts[1:])
    ):
        sentence = parts[0]
    words = sentence.split()
    # Only a condition or time lead-in, or a reason before "so", is cut ("When …, make sure …");
    # a rule that ends a list of steps ("…, and run them to make sure …") is the whole sentence.
    if len(words) > 20:
        pieces = sentence.split(", ")
        for k, piece in enumerate(pieces):
            if _rule_in(piece) and (k == 0 or _FRAME.match(sentence) or _CONSEQUENCE.match(piece)):
                return [_CONSEQUENCE.sub("", ", ".join(pieces[k:]), count=1)]
    return [sentence]


# An imperative opening a sentence of a rejection reason ("use pnpm instead", "Add the config to
# the .vscode settings", "please look into X first"); "You didn't remove …" states a fault.
_IMPERATIVE_START = re.compile(
    r"^(?:please\s+|just\s+|instead,?\s+|first,?\s+)*(?:add|use|run|do|don'?t|make|put|keep|check|look|try|remove|"
    r"write|create|fix|change|stop|wait|leave|skip|move|rename|call|read|ask|go|start|install|update|revert|undo|"
    r"let'?s)\b",
    re.I,
)
# Claude Code keeps the reason a user typed when rejecting a call in the rejection's tool result.
_REJECTION_REASON = re.compile(
    r"^The user doesn'?t want to (?:proceed with this tool use|take this action)\b.*?the user said:\s*\n(.+)\Z",
    re.S,
)


def rejection_reason(output: str) -> str | None:
    """The words a user typed when rejecting a tool call, as the harness recorded them."""
    m = _REJECTION_REASON.match(output.strip())
    return m.group(1).strip() if m else None


def is_template(text: str) -> bool:
    """A harness's task template (an issue prompt, SWE-agent's INSTRUCTIONS) rather than typed words."""
    return bool(_TEMPLATE.search(text))


def constraint_sentences(
    text: str, reason: bool = False, tools: frozenset[str] = frozenset()
) -> Iterator[tuple[str, str]]:
    """(rule, marker) for each sentence or clause of a user message that states a rule
    (:func:`_constraint_sentences`). Typographic apostrophes ("Don’t use external libraries") are
    read as typed ones; the rule is given as the user typed it."""
    if "’" not in text:
        yield from _constraint_sentences(text, reason, tools)
        return
    plain = text.replace("’", "'")  # the same length: positions carry over
    for rule, marker in _constraint_sentences(plain, reason, tools):
        at = plain.find(rule)
        yield (text[at : at + len(rule)] if at >= 0 else rule), marker


# "Use attempt_completion to confirm …", "Use convertPostgresSchemaToDb2 on all migration files":
# the agent's own tool by name. A name is a tool when the agent calls a tool of that name in the
# session, or when the message names an MCP server or MCP tools (the tools it serves); any other
# identifier after "use" is a name in the code (``_CODE_USE``).
_TOOL_USE = re.compile(
    r"^(?i:(?:(?:please|then|now|also|and|first|finally),?\s+)*use\s+(?:the\s+)?)`?(?P<tool>[A-Za-z][\w.-]*[_A-Z][\w.-]*)`?"
    r"(?=[\s.,;:]|$)"
)
_MCP = re.compile(r"\bMCP\b")
# A name shaped as an identifier (``attempt_completion``, ``convertSchema``), not a plain word.
_IDENTIFIER_SHAPE = re.compile(r"_|[a-z][A-Z]")


def agent_tools(calls: Iterable[ToolCall]) -> frozenset[str]:
    """The names of the tools the agent called (an MCP call's served tool too), those shaped as
    identifiers (``attempt_completion``, ``convertSchema``): "use bash" stays an ordinary word."""
    names = set()
    for call in calls:
        for name in (call.name, call.args.get("tool_name")):
            if isinstance(name, str) and _IDENTIFIER_SHAPE.search(name):
                names.add(name)
    return frozenset(names)


def _tool_use(sentence: str, tools: frozenset[str], mcp: bool) -> bool:
    s = _FRAME.sub("", sentence, count=1)
    m = _TOOL_USE.match(s)
    if not m:
        return False
    name = m.group("tool")
    return name in tools or (mcp and bool(_IDENTIFIER_SHAPE.search(name)))


# "I am the Product/Integration Lead for X." introduces the speaker: the request comes after it.
_SELF_INTRO = re.compile(
    r"^(?:hi|hello|hey)?[,!]?\s*(?:i\s+am|i'm)\s+(?:the|a|an)\s+[^.?!]{1,80}[.!]?$", re.I
)


# "DO NOT Include in This Phase:\n- Unit tests": a prohibition whose object is the list under it is
# one rule, the header alone says nothing.
_PROHIBITED_LIST = re.compile(
    r"^([ \t]*(?:\d+[.)][ \t]+)?\**(?:do not|don't|never)\b[^\n]*?:\**)[ \t]*\n((?:[ \t]*[-*•][ \t]+[^\n]*(?:\n|$))+)",
    re.I | re.M,
)


def _join_prohibited_list(m: re.Match) -> str:
    items = [re.sub(r"^[ \t]*[-*•][ \t]+", "", i).strip() for i in m.group(2).splitlines() if i.strip()]
    return f"{m.group(1).replace('**', '')} {'; '.join(items)}\n"


def _constraint_sentences(
    text: str, reason: bool = False, tools: frozenset[str] = frozenset()
) -> Iterator[tuple[str, str]]:
    """(rule, marker) for each sentence or clause of a user message that states a rule.

    A rule is marked (a prohibition, obligation, ``only`` limit, the agent as a modal's subject,
    an answer-form limit) or is a process directive: an imperative about how the agent works
    (see ``_PROCESS_VERB``). The message's opening sentence is its request, the task itself, so
    a directive there counts only with a marker ("Run the tests" alone is the task).

    ``reason``: the text is why the user rejected a call. It has no opening request, and any
    imperative in it steers how the agent works, so it counts as a directive.
    """
    first, investigation, document, task_header = not reason, False, False, False
    mcp = bool(_MCP.search(text))
    deliverables = False
    text = _PROHIBITED_LIST.sub(_join_prohibited_list, text)
    for line, advice in _candidate_lines(text):
        # A Markdown heading names a topic ("## Pull request title"): only a marked rule counts there.
        heading = line.startswith("#")
        # An item of what to deliver: its steps are the task (a marked rule in it still counts).
        deliverable = bool(_ITEM_MARK.match(line)) and deliverables
        if not deliverable:
            deliverables = bool(_DELIVERABLES.search(line))
        advice = advice or heading
        if _TASK_HEADER.match(line) and not reason:
            first = task_header = True
            continue
        if task_header and _ITEM_MARK.match(line):
            first = False  # "Your task:\n1. Review … 2. Analyze …": steps, read one by one
        task_header = False
        line = _COMMAND_QUOTE.sub("", _LIST_MARK.sub("", line).strip())
        for sentence in _SENTENCE_END.split(line):
            s = _LEAD_IN.sub("", sentence.strip().replace("**", "")).strip()
            if s.count('"') % 2:  # the open or close of a quote around the whole message
                s = s.strip('"').strip()
            # A heading ("## My request for Codex:") names the request below it, it is not one.
            opening = first and not heading
            first = first and (heading or not s or bool(_SELF_INTRO.match(s)))
            if opening:
                investigation = bool(_INVESTIGATION.match(s)) and not _CHANGE_TOO.search(s)
                document = bool(_DOCUMENT_REQUEST.match(s))
            if document and (_KEEP_IT.match(s) or _DOCUMENT_CONTENT.match(s)):
                continue
            standing = _STANDING_CLAUSE.search(s)
            if standing and (not s.endswith("?") or _POLITE_REQUEST.match(s)):
                yield standing.group(0).strip(), "standing"
                continue
            question = s.endswith("?") and (not _POLITE_REQUEST.match(s) or bool(_ASKS_WHY.search(s)))
            if not question and not advice and _tool_use(s, tools, mcp):
                yield s, "agent tool"
                continue
            if (
                len(s) < 8
                or question
                or _STRAY.match(s)
                or _CODE_USE.match(s)
                or _STATED.search(s)
                or _CONTENT_FIDELITY.match(s)
                or _KEEP_THING.match(s)
            ):
                continue
            if _LIST_HEADER.search(s) and not _rule_in(s):
                continue
            if not _rule_in(s):
                if _INTRO_COLON.search(s):  # "Run it with:" introduces what follows it
                    continue
                if deliverable:
                    continue
                if (
                    not advice
                    and (not opening or _BARE_STOP.match(s) or _ORDER_FRAME.match(s))
                    and _directive(s, investigation)
                ) or (not advice and _READ_THEN_ACT.match(s)):
                    yield _directive_clause(s), "directive"
                elif reason and _IMPERATIVE_START.match(s):
                    yield s, "rejection"
                continue
            if advice and (not _PROHIBIT_OR_ONLY.search(s) or _HEDGED.search(s)):
                continue
            if _THINKING.match(s):  # the keyword is the rule; the rest of the sentence is the task
                yield _THINKING.match(s).group(0), "thinking"
                continue
            for clause in _clauses(s):
                km = _rule_in(clause)
                if km:
                    yield clause.strip(), " ".join(km.group(0).lower().split())


# The legacy name: candidates and the continuation stage call it per user message.
constraint_lines = constraint_sentences
