"""Time named in text (no I/O): the dates a query asks about, and the dates a memory speaks of.

A query that names a time ("on 4 December 2023", "in August", "early June", "the second week of
November", "2022", "last week", "two months ago", "recently", "as of September 2023", "last
summer", "between May and July 2023", "Q3 2022", "early 2021", "the week before last", "a
fortnight ago") gets a ``TimeWindow``: ranking lifts the memories that happened in it, or speak
of a time in it, above the others (a soft window, never a filter: a user's date is often a
little off). Absolute dates stop competing as keywords, since a memory's
time is in its ``occurred_at``, not in its words; relative words ("last weekend") and seasons
("summer 2021") stay keywords, as memories often say them too (a memory of 9 November 2022 saying
"last summer" is what a LoCoMo question calls "summer 2021": the words find it where the window,
reading it as the summer of 2022, does not).

A memory's own words are read against its ``occurred_at``: a turn of 5 December saying
"yesterday" speaks of 4 December. English only; anything not understood, or impossible
("31 February"), is no time at all, never an error.

Why not a library: dateparser 1.2's ``search_dates`` finds dates in free text, but measured here
it read "I may go to the park" as May, "call March about the invoice" as March and the "we" of
"what did we decide last week" as a date; it costs 2-5 ms a query (353 ms the first) and 0.44 s
to import, on a path that must stay within a millisecond. dateutil's fuzzy parser returns one
date per text and has no relative expressions. The grammar below is small, exact about what it takes, and runs in
microseconds for a query; a memory's words are read once, when it is stored (``times_named``).
"""

# longer than 500 lines: one grammar, each pattern beside the function that reads what it matched;
# split in two, a pattern and its reading would live in different files.
from __future__ import annotations

import functools
import re
from calendar import monthrange
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ollama_mcp.domain import format_timestamp

MONTHS = {
    name: number
    for number, names in enumerate(
        (("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
         ("july", "jul"), ("august", "aug"), ("september", "sept", "sep"), ("october", "oct"),
         ("november", "nov"), ("december", "dec")),
        start=1,
    )
    for name in names
}
WEEKDAYS = {
    name: i for i, name in enumerate(("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"))
}
NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "a couple": 2, "couple of": 2,
    "a few": 3, "few": 3, "several": 4,
}
RECENT_DAYS = 30  # "recently", "lately"

_FULL_MONTH = "january|february|march|april|may|june|july|august|september|october|november|december"
_ANY_MONTH = _FULL_MONTH + "|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_NAMED_YEAR = r"(?P<{}>(?:1[89]|2[01])\d\d)"  # a year's group, named (a range has two)
_YEAR = _NAMED_YEAR.format("year")
_YEAR2 = _NAMED_YEAR.format("year2")
_SEASON = r"(?P<season>spring|summer|fall|autumn|winter)"
_NUMBER = (
    r"(?P<n>\d{1,3}|a couple of|a couple|couple of|a few|an?|one|two|three|four|five|six|seven|eight|nine|ten"
    r"|eleven|twelve|few|several)"
)
_UNIT = r"(?P<unit>day|week|fortnight|month|year)s?"
# Words that make a bare month or year a time ("in May", "since 2022"), and those that make it
# one end of a window ("as of", "before", "since").
_LEAD = (
    r"(?P<lead>as of|up to|until|till|before|by|since|after|from|in|during|on|of|early|late|mid-?|last|this|through)\s+"
)

_ABSOLUTE_GRAMMAR = [
    # "between June and July 2023", "from May to June": the months and those between
    ("months", rf"\b(?:between|from)\s+(?:the\s+)?(?P<month>{_FULL_MONTH})(?:,?\s+{_YEAR})?"
               rf"\s+(?:and|to|until|till|through)\s+(?:the\s+)?(?P<month2>{_FULL_MONTH})(?:,?\s+{_YEAR2})?\b", re.I),
    ("years", rf"\b(?:between|from)\s+(?:the\s+year\s+)?{_YEAR}\s+(?:and|to|until|till|through)\s+{_YEAR2}\b", re.I),
    ("day", r"\b(?P<year>\d{4})-(?P<month>\d\d)-(?P<day>\d\d)\b", 0),
    ("day", rf"\b{_DAY}(?:\s+of)?\s+(?P<month>{_ANY_MONTH})\.?(?:,?\s+{_YEAR})?\b", re.I),
    ("day", rf"\b(?P<month>{_ANY_MONTH})\.?\s+{_DAY}\b(?!:)(?:,?\s+{_YEAR})?\b", re.I),
    ("month", rf"\b(?P<month>{_ANY_MONTH})\.?,?\s+(?:of\s+)?{_YEAR}\b", re.I),
    ("month", r"\b(?P<year>\d{4})-(?P<month>\d\d)\b(?!-)", 0),
    ("month", rf"(?<!\w)(?:{_LEAD}|mid-)(?:the\s+)?(?:month\s+of\s+)?(?P<month>{_FULL_MONTH})\b", re.I),
    # "the summer of 2023", "winter 2022", "in fall 2021"
    ("season", rf"\b(?:the\s+)?{_SEASON}\s+(?:of\s+)?{_YEAR}\b", re.I),
    # "Q3 2023", "the second quarter of 2022"
    ("quarter", rf"\b(?:q(?P<quarter>[1-4])|(?:the\s+)?(?P<nth>first|second|third|fourth|1st|2nd|3rd|4th)\s+quarter"
                rf"\s+of)\s+{_YEAR}\b", re.I),
    # "early 2023", "mid-2022", "the end of 2021": a third of the year
    ("part_of_year", rf"\b(?:(?P<early>early(?:\s+in)?|(?:the\s+)?(?:beginning|start)\s+of)"
                     rf"|(?P<mid>mid-?|(?:the\s+)?middle\s+of)|(?P<late>late(?:\s+in)?|(?:the\s+)?end\s+of))"
                     rf"\s*(?:the\s+year\s+)?{_YEAR}\b", re.I),
    ("year", rf"(?<!\w){_LEAD}(?:the\s+year\s+)?{_YEAR}\b", re.I),
]
_RELATIVE_GRAMMAR = [
    ("day_before_yesterday", r"\bthe day before yesterday\b", re.I),
    ("yesterday", r"\b(?:yesterday|last night)\b", re.I),
    ("today", r"\b(?:today|tonight|this (?:morning|afternoon|evening))\b", re.I),
    ("ago", rf"\b{_NUMBER}\s+{_UNIT}\s+ago\b", re.I),
    ("past", rf"\b(?:in\s+)?(?:the\s+)?(?:last|past)\s+{_NUMBER}\s+{_UNIT}\b", re.I),
    ("before_last", r"\bthe\s+(?P<unit>week|weekend|month|year)\s+before\s+last\b", re.I),
    ("weekend", r"\b(?P<which>last|this|past)\s+weekend\b", re.I),
    ("period", r"\b(?P<which>last|this|past|previous|prior)\s+(?P<unit>week|month|year)\b", re.I),
    # "last summer", "this winter", "in the fall" (without a year: the latest one begun)
    ("season", rf"\b(?:(?P<which>last|this|past)|in|during)\s+(?:the\s+)?{_SEASON}\b", re.I),
    ("weekday", r"\blast\s+(?P<weekday>monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b", re.I),
    ("recently", r"\b(?:recently|lately|these days)\b", re.I),
    # "on the 15th" (with a month after it, it is an absolute date, read first)
    ("ordinal_day", r"\bon\s+the\s+(?P<day>[12]?[1-9]|[123]0|31)(?:st|nd|rd|th)\b", re.I),
]
# A cheap first look: text without any of these words or a 4-digit number names no time.
_MAYBE_TIME = re.compile(
    rf"\b(?:{_ANY_MONTH}|\d{{4}}|\d\d?(?:st|nd|rd|th)|yesterday|today|tonight|night|morning|ago|last|past|this|recently"
    r"|lately|days|previous|prior|spring|summer|fall|autumn|winter)\b", re.I
)
# A window word just before an absolute date ("as of 4 May", "before April 10, 2023").
_LEAD_BEFORE = r"\b(?P<lead>as of|up to|until|till|before|by|since|after|from|through)\s+(?:the\s+)?$"
# A period counted back from the date after it ("the week before August 3, 2023", "two weeks
# before 11 August", "the Sunday before October 25"): read against that date, not before it.
_COUNTED_BACK = (
    rf"\b(?:(?:the|last)\s+)?(?:{_NUMBER}\s+)?"
    r"(?P<unit>day|week|weekend|month|year|monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?\s+$"
)
# A part of the month named right after it ("early June", "the beginning of May 2023", "the
# second week of November", "mid-March", "late August", "the end of July"): those days, not the
# whole month.
_PART_OF_MONTH = (
    r"(?:\b(?P<early>early(?:\s+in)?|(?:the\s+)?(?:beginning|start)\s+of)"
    r"|\b(?P<mid>mid-?|(?:the\s+)?middle\s+of)"
    r"|\b(?P<late>late(?:\s+in)?|(?:the\s+)?end\s+of)"
    r"|\b(?:the\s+)?(?P<week>first|second|third|fourth|last|1st|2nd|3rd|4th)\s+week\s+of)"
    r"\s*(?:the\s+)?(?:month\s+of\s+)?$"
)
# A month's weeks and a year's quarters, counted in words.
_ORDINALS = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4}


class _Grammar:
    """The patterns above, compiled (once, by ``_grammar``)."""

    def __init__(self) -> None:
        self.absolute = [(kind, re.compile(pattern, flags)) for kind, pattern, flags in _ABSOLUTE_GRAMMAR]
        self.relative = [(kind, re.compile(pattern, flags)) for kind, pattern, flags in _RELATIVE_GRAMMAR]
        self.lead_before = re.compile(_LEAD_BEFORE, re.I)
        self.counted_back = re.compile(_COUNTED_BACK, re.I)
        self.part_of_month = re.compile(_PART_OF_MONTH, re.I)


@functools.cache
def _grammar() -> _Grammar:
    """Compiled the first time a text may name a time: compiling at import took 3-9 ms of every
    server's start, on the way to its first search, and most queries never need it."""
    return _Grammar()


_OPEN_END = {"as of", "up to", "until", "till", "by", "through"}  # everything up to the end of it
_BEFORE = {"before"}
_FROM = {"since", "from"}  # everything from its start on
_AFTER = {"after"}


@dataclass(frozen=True)
class Mention:
    """A time a text names: [start, end) in UTC, and where in the text it is."""

    start: datetime
    end: datetime
    at: tuple[int, int]
    relative: bool
    lead: str = ""  # "as of", "since"...: the word that made it one end of a window
    worded: bool = False  # its words stay keywords though it is absolute: "summer" is said, "June 2023" rarely


@dataclass(frozen=True)
class TimeWindow:
    """The time a query asks about, as stored timestamps (None: open at that end), and the query
    without its absolute dates (for keywords)."""

    start: str | None
    end: str | None
    keyword_text: str

    def holds(self, moment: str) -> bool:
        return (self.start is None or moment >= self.start) and (self.end is None or moment < self.end)


def mentions(text: str, reference: datetime) -> list[Mention]:
    """Every time ``text`` names, resolved against ``reference`` (when it was said), in order;
    where two overlap in the text, the first pattern listed wins."""
    if not _MAYBE_TIME.search(text):
        return []  # most texts name no time: one scan decides
    grammar = _grammar()
    found: list[Mention] = []
    taken: list[tuple[int, int]] = []

    def free(a: int, b: int) -> bool:
        return all(b <= x or a >= y for x, y in taken)

    for kind, pattern in grammar.absolute:
        for match in pattern.finditer(text):
            if not free(*match.span()):
                continue
            span = _absolute(kind, match, reference)
            taken.append(match.span())  # an impossible "31 February 2023" is not "February 2023" either
            if span is not None:
                at, lead = match.span(), (match.groupdict().get("lead") or "").lower()
                if kind == "month":
                    part = grammar.part_of_month.search(text, max(0, match.start("month") - 30), match.start("month"))
                    if part is not None:  # (it ends at the month, so it holds any lead the match has: "of", "early")
                        span, at, lead = _part_of_month(part, span[0]), (part.start(), at[1]), ""
                before = grammar.lead_before.search(text, max(0, at[0] - 12), at[0])
                if before is not None:
                    at, lead = (before.start(), at[1]), before["lead"].lower()
                    back = grammar.counted_back.search(text, max(0, at[0] - 30), at[0]) if lead == "before" else None
                    if back is not None and (counted := _counted_back(back, span[0])) is not None:
                        span, at, lead = counted, (back.start(), at[1]), ""
                found.append(Mention(span[0], span[1], at, False, " ".join(lead.split()), kind == "season"))
    for kind, pattern in grammar.relative:
        for match in pattern.finditer(text):
            if not free(*match.span()):
                continue
            span = _relative(kind, match, reference)
            if span is not None:
                found.append(Mention(span[0], span[1], match.span(), True))
                taken.append(match.span())
    return sorted(found, key=lambda m: m.at)


def query_window(query: str, reference: datetime) -> TimeWindow | None:
    """The window a query asks about, or None when it names no time (or only impossible ones).

    An absolute date wins over relative words, and a period counted back from it is read against
    it ("last weekend before April 10, 2023" asks about 8-9 April); of several, the window spans
    them all. "as of"/"until"/"before" open it at the start, "since"/"after" at the end.
    """
    found = mentions(query, reference)
    absolute = [m for m in found if not m.relative]
    chosen = absolute or found
    if not chosen:
        return None
    start: datetime | None = min(m.start for m in chosen)
    end: datetime | None = max(m.end for m in chosen)
    lead = chosen[0].lead
    if lead in _OPEN_END:
        start = None
    elif lead in _BEFORE:
        start, end = None, chosen[0].start
    elif lead in _FROM:
        end = None
    elif lead in _AFTER:
        start, end = chosen[-1].end, None
    keyword_text = query
    for m in sorted((m for m in absolute if not m.worded), key=lambda m: -m.at[0]):
        keyword_text = keyword_text[: m.at[0]] + " " + keyword_text[m.at[1]:]
    return TimeWindow(
        None if start is None else format_timestamp(start), None if end is None else format_timestamp(end),
        keyword_text if keyword_text.strip() else query,
    )


def times_named(text: str, occurred_at: str) -> str:
    """The times ``text`` names, read against when it was said: each as "start/end" (stored
    timestamps), separated by spaces; "" when it names none. Stores keep it beside the memory
    (``memories.spoken_of``), so that a search naming a time reads it instead of parsing the text of
    every candidate (50-160 µs each for chat text). A change to what ``mentions`` finds must ship
    with a migration setting ``spoken_of`` back to NULL: the background then reads every memory again.
    """
    said = datetime.fromisoformat(occurred_at)
    return " ".join(f"{format_timestamp(m.start)}/{format_timestamp(m.end)}" for m in mentions(text, said))


def in_window(window: TimeWindow, occurred_at: str, spoken: str) -> bool:
    """Whether a memory belongs to the window: it happened in it, or a time its words name
    (``spoken``, as ``times_named`` gives it) overlaps it."""
    if window.holds(occurred_at):
        return True
    for named in spoken.split():
        start, _, end = named.partition("/")
        if (window.start is None or end > window.start) and (window.end is None or start < window.end):
            return True
    return False


# -- resolving ---------------------------------------------------------------------------------


def _day(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def _absolute(kind: str, match: re.Match[str], reference: datetime) -> tuple[datetime, datetime] | None:
    groups = match.groupdict()
    year = int(groups["year"]) if groups.get("year") else None
    if year is not None and not 1900 <= year <= 2199:
        return None
    if kind == "months":
        return _months(match, reference)
    if kind == "years":
        assert year is not None
        end_year = int(match["year2"])
        if not year < end_year <= 2199:
            return None
        return datetime(year, 1, 1, tzinfo=UTC), datetime(end_year + 1, 1, 1, tzinfo=UTC)
    if year is not None and kind in _PARTS_OF_YEAR:
        first, months = _part_of_year(kind, match)
        start = _add_months(datetime(year, 1, 1, tzinfo=UTC), first)
        return start, _add_months(start, months)
    if kind == "year":
        assert year is not None
        return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
    raw_month = groups["month"].lower().rstrip(".")
    month = int(raw_month) if raw_month.isdigit() else MONTHS.get(raw_month)
    if month is None or not 1 <= month <= 12:
        return None
    if year is None:  # the latest such month (or day) not after the reference
        year = (
            reference.year
            if (month, int(groups.get("day") or 1)) <= (reference.month, reference.day)
            else reference.year - 1
        )
    if kind == "month":
        start = datetime(year, month, 1, tzinfo=UTC)
        return start, _add_months(start, 1)
    day = int(groups["day"])
    if not 1 <= day <= monthrange(year, month)[1]:
        return None  # "31 February": no such day, so no window
    start = datetime(year, month, day, tzinfo=UTC)
    return start, start + timedelta(days=1)


# Seasons as the northern hemisphere's meteorologists count them: each one's first month, counted
# from January of the year that names it (0), three months long. A winter is named by the year of
# its January ("winter 2023" is December 2022 to February 2023), the part most of it falls in.
_SEASONS = {"spring": 2, "summer": 5, "fall": 8, "autumn": 8, "winter": -1}
_PARTS_OF_YEAR = ("season", "quarter", "part_of_year")


def _part_of_year(kind: str, match: re.Match[str]) -> tuple[int, int]:
    """The part of a named year ``match`` names: its first month (from January, 0), how many."""
    if kind == "season":
        return _SEASONS[match["season"].lower()], 3
    if kind == "quarter":
        return 3 * (int(match["quarter"]) if match["quarter"] else _ORDINALS[match["nth"].lower()]) - 3, 3
    return (0 if match["early"] else 4 if match["mid"] else 8), 4  # early, mid- or late in the year


def _months(match: re.Match[str], reference: datetime) -> tuple[datetime, datetime] | None:
    """"between June and July 2023", "from May to June": the first month's start to the end of
    the second. A year given to one is the other's too (the first falls in the year before when
    it comes later in the calendar); without a year, the latest such span begun by the reference."""
    first, last = MONTHS[match["month"].lower()], MONTHS[match["month2"].lower()]
    wrap = 1 if first > last else 0  # "from November to February": across a new year
    if match["year2"]:
        end_year = int(match["year2"])
        start_year = int(match["year"]) if match["year"] else end_year - wrap
    elif match["year"]:
        start_year = int(match["year"])
        end_year = start_year + wrap
    else:
        start_year = reference.year if first <= reference.month else reference.year - 1
        end_year = start_year + wrap
    start = datetime(start_year, first, 1, tzinfo=UTC)
    end = _add_months(datetime(end_year, last, 1, tzinfo=UTC), 1)
    return (start, end) if start < end and end_year - start_year <= 1 else None


def _season(season: str, which: str | None, today: datetime) -> tuple[datetime, datetime]:
    """A season named without a year: "last" is the latest one over, "this" (or none: "in the
    summer") the latest one begun."""
    first = _SEASONS[season]
    for year in range(today.year + 1, today.year - 2, -1):
        start = _add_months(datetime(year, 1, 1, tzinfo=UTC), first)
        end = _add_months(start, 3)
        if (end <= today) if which == "last" else (start <= today):
            return start, end
    raise AssertionError("a season began within the last two years")  # pragma: no cover


def _part_of_month(match: re.Match[str], first: datetime) -> tuple[datetime, datetime]:
    """The days of the month beginning ``first`` that ``match`` (``_PART_OF_MONTH``) names."""
    days = monthrange(first.year, first.month)[1]
    if match["early"]:
        begin, end = 1, 10
    elif match["mid"]:
        begin, end = 11, 20
    elif match["late"]:
        begin, end = 21, days
    elif match["week"].lower() == "last":
        begin, end = days - 6, days
    else:
        n = _ORDINALS[match["week"].lower()]
        begin, end = 7 * n - 6, 7 * n
    return first.replace(day=begin), first.replace(day=end) + timedelta(days=1)


def _relative(kind: str, match: re.Match[str], reference: datetime) -> tuple[datetime, datetime] | None:
    today = _day(reference.astimezone(UTC))
    groups = match.groupdict()
    if kind in ("today", "yesterday", "day_before_yesterday"):
        start = today - timedelta(days={"today": 0, "yesterday": 1, "day_before_yesterday": 2}[kind])
        return start, start + timedelta(days=1)
    if kind == "recently":
        return today - timedelta(days=RECENT_DAYS), today + timedelta(days=1)
    if kind == "ordinal_day":  # the latest such day not after today, as for "4 May" without a year
        day, month = int(groups["day"]), today.replace(day=1)
        while day > monthrange(month.year, month.month)[1] or month.replace(day=day) > today:
            month = _add_months(month, -1)  # (at most two steps back: every other month has a 31st)
        start = month.replace(day=day)
        return start, start + timedelta(days=1)
    monday = today - timedelta(days=today.weekday())
    if kind == "weekend":
        saturday = monday - timedelta(days=2) if groups["which"].lower() != "this" else monday + timedelta(days=5)
        return saturday, saturday + timedelta(days=2)
    if kind == "weekday":
        start = _last(today, groups["weekday"])
        return start, start + timedelta(days=1)
    if kind == "season":
        return _season(groups["season"].lower(), (groups["which"] or "").lower().replace("past", "last") or None, today)
    unit = groups["unit"].lower()
    if kind == "before_last":  # the whole week, weekend, month or year before the last one
        if unit == "weekend":
            saturday = monday - timedelta(days=9)
            return saturday, saturday + timedelta(days=2)
        if unit == "week":
            return monday - timedelta(days=14), monday - timedelta(days=7)
        if unit == "month":
            start = _add_months(today.replace(day=1), -2)
            return start, _add_months(start, 1)
        start = today.replace(year=today.year - 2, month=1, day=1)
        return start, start.replace(year=start.year + 1)
    if kind == "period":
        this = groups["which"].lower() == "this"
        if unit == "week":
            start = monday if this else monday - timedelta(days=7)
            return start, start + timedelta(days=7)
        if unit == "month":
            start = today.replace(day=1) if this else _add_months(today.replace(day=1), -1)
            return start, _add_months(start, 1)
        start = today.replace(month=1, day=1)
        start = start if this else start.replace(year=start.year - 1)
        return start, start.replace(year=start.year + 1)
    n = _number(groups["n"])
    if n is None:
        return None
    if kind == "past":  # "the last three weeks": from then until now
        return _back(today, n, unit), today + timedelta(days=1)
    return _about(_back(today, n, unit), unit)  # "two months ago"


def _counted_back(match: re.Match[str], anchor: datetime) -> tuple[datetime, datetime] | None:
    """The period ``match`` (``_COUNTED_BACK``) names before the day ``anchor``: the whole period
    right before it ("the week before": its 7 days), or about n units before ("two weeks before")."""
    day = _day(anchor)
    unit = match["unit"].lower()
    if unit in WEEKDAYS:
        start = _last(day, unit)
        return start, start + timedelta(days=1)
    if unit == "weekend":
        saturday = _last(day, "saturday")
        return saturday, saturday + timedelta(days=2)
    n = 1 if match["n"] is None else _number(match["n"])
    if n is None:
        return None
    if n == 1:
        return _back(day, 1, unit), day
    return _about(_back(day, n, unit), unit)


def _last(day: datetime, weekday: str) -> datetime:
    """The last ``weekday`` ("friday") before ``day``."""
    return day - timedelta(days=(day.weekday() - WEEKDAYS[weekday.lower()]) % 7 or 7)


def _about(at: datetime, unit: str) -> tuple[datetime, datetime]:
    """A window around ``at``: its day, or give or take half a ``unit``."""
    if unit == "day":
        return at, at + timedelta(days=1)
    half = {"week": timedelta(days=4), "fortnight": timedelta(days=4), "month": timedelta(days=16),
            "year": timedelta(days=183)}[unit]
    return at - half, at + half + timedelta(days=1)


def _number(word: str) -> int | None:
    word = " ".join(word.lower().split())
    if word.isdigit():
        return int(word) if 0 < int(word) <= 200 else None
    return NUMBERS.get(word)


def _back(today: datetime, n: int, unit: str) -> datetime:
    if unit == "day":
        return today - timedelta(days=n)
    if unit in ("week", "fortnight"):
        return today - timedelta(weeks=n * (2 if unit == "fortnight" else 1))
    if unit == "month":
        return _add_months(today, -n)
    return _add_months(today, -12 * n)


def _add_months(moment: datetime, months: int) -> datetime:
    index = moment.year * 12 + moment.month - 1 + months
    year, month = divmod(index, 12)
    if year < 1:
        return moment
    return moment.replace(year=year, month=month + 1, day=min(moment.day, monthrange(year, month + 1)[1]))
