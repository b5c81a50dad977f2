"""Stand-in ``WebAgentTextEnv``: search page -> results (one right product) -> item page -> buy."""

RIGHT, WRONG = "b000000001", "b000000002"


class WebAgentTextEnv:
    """Same interface as WebShop's text env; a three-page shop whose goal ``i`` wants product RIGHT."""

    def __init__(self, observation_mode="text", human_goals=True, **kwargs):
        self.page, self.asin, self.goal = "search", None, 0

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
