"""The research world: the generated corpus of towns, people and companies, its questions, and the tools and parsing the agents and the error generators share."""

from __future__ import annotations

LAST = ["Voss", "Brandt", "Okafor", "Lindqvist", "Marek", "Dunmore", "Ferreira", "Halloran", "Ishikawa", "Kovac",
        "Moreau", "Nakamura", "Petrov", "Quist", "Rasmussen", "Solberg", "Tennant", "Varga", "Whitlock", "Zeller"]


TOWN_B = ["mora", "rava", "wick", "haven", "dale", "stead", "mere", "ford", "holm", "gate", "lin", "bury"]


CO_B = ["Foods", "Logistics", "Textiles", "Works", "Robotics", "Mills", "Optics", "Brewing", "Ceramics", "Energy"]
