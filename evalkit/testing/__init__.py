"""Test kit for evalkit and its plugin authors (as ``pandas.testing`` is for pandas): a local fake
OpenAI-compatible server (:mod:`.fakeserver`) with the Batch API (:mod:`.fakebatch`), scripted
faults (:mod:`.faults`) and a reader of its request log (:mod:`.serverlog`).

``evalkit fake-server`` starts it; a backend or agent plugin can be tested against real HTTP with
it instead of a mocked client. Nothing else in evalkit imports this package."""
