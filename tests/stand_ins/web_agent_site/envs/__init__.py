"""Stand-in ``WebAgentTextEnv``: search page -> results (one right product) -> item page -> buy.

Follows princeton-nlp/WebShop @ 64fa2a5, ``web_agent_site/envs/web_agent_text_env.py``: ``reset(session)``
returns ``(obs, None)`` (l. 240-260); ``step`` lower-cases the argument, searches only with a non-empty
``search[...]``, clicks only a listed clickable other than ``search``, does nothing on any other action and
returns ``(obs, reward, done, info)`` (l. 86-125); ``get_available_actions`` gives ``{has_search_bar,
clickables}`` with button texts lower-cased (l. 127-148); ``get_instruction_text`` (l. 162); the goal list
at ``env.server.goals`` (``SimServer``, l. 63 and 302-307: dicts with ``asin``, ``instruction_text``,
``goal_options``, ...). The pages, products and reward are ours (WebShop's need its catalog, search index and
spaCy model); its 500 goals stand for the full protocol's human goals 0-499.
"""

RIGHT, WRONG = "b000000001", "b000000002"


class _Server:
    """The part of ``SimServer`` the adapter reads: its goal list."""

    def __init__(self) -> None:
        self.goals = [{"asin": RIGHT, "instruction_text": f"i need product one for goal {i}", "goal_options": {}}
                      for i in range(500)]  # fmt: skip


class WebAgentTextEnv:
    """Same interface as WebShop's text env; a three-page shop whose goal ``i`` wants product RIGHT."""

    def __init__(self, observation_mode="text", human_goals=True, **kwargs):
        self.page, self.asin, self.goal = "search", None, 0
        self.server = _Server()

    def reset(self, session=None):
        self.page, self.asin, self.goal = "search", None, int(session or 0)
        return self._obs(), None

    def get_instruction_text(self):
        return f"i need product one for goal {self.goal}"

    def get_available_actions(self):
        clickables = {
            "search": ["search"],
            "results": ["back to search", "next >", RIGHT, WRONG],
            "item": ["back to search", "< prev", "buy now"],
        }[self.page]
        return {"has_search_bar": self.page == "search", "clickables": clickables}

    def step(self, action):
        name, _, arg = action.partition("[")
        arg = arg.rstrip("]").lower()
        if self.page == "search" and name == "search" and arg:
            self.page = "results"
        elif name == "click" and arg in self.get_available_actions()["clickables"]:
            if arg == "back to search":
                self.page = "search"
            elif arg in (RIGHT, WRONG):
                self.page, self.asin = "item", arg
            elif arg == "< prev":
                self.page = "results"
            elif arg == "buy now":
                return "Thank you for shopping", (1.0 if self.asin == RIGHT else 0.25), True, None
        return self._obs(), 0.0, False, None

    def _obs(self):
        return f"WebShop [SEP] Instruction: [SEP] {self.get_instruction_text()} [SEP] page {self.page}"
