"""What a memory states about whom (no I/O): each sentence read for a subject, an attribute of it
that holds one value at a time, and the value it says that attribute has, or ends.

"Maren moved to Lisbon." says of ``maren`` that ``residence`` is ``lisbon``; "Correction: our
standup is on Tuesday, not Monday." says of the speaker that ``schedule:standup`` is ``tuesday``
and ends ``monday``; "We no longer use MySQL." ends ``mysql`` for the speaker's ``database``.
Read once, when a memory is stored (``claims_of``, kept with its row), and never trusted more
than it deserves: a question, a plan or a wish ("we might move to Porto") states nothing; a value
said as one more ("also likes coffee", "a second job at ...") is ``additive`` and displaces
nothing; a fact that cannot change (where someone was born, an allergy) is not read as one that
can; another person's value is theirs. What is not understood is no claim at all, never an error.

How the parts are found, without a language model:
- **values** are names (capitalised words other than the subject: "Lisbon", "Fernwood Labs",
  "PostgreSQL"), weekdays and well-known products of a kind (``KNOWN``, lowercase too);
- the **subject** is the first name not governed by a preposition ("Maren's team uses ..."), else
  the speaker ("I", "we", or nobody named: a note "standup is Monday" is the user's);
- the **attribute** is the nearest cue word of a kind that holds one value (``CUES``: "lives",
  "moved", "flat" → residence; "works", "job", "badge" → work; "standup", "class" → a schedule of
  that event when the value is a day), else the kind of a known value, else the noun of a
  possessive frame ("my editor is Neovim" → ``editor``), else none: the write may still place
  such a claim by its value (``storage/sql/placing.py``: "Maren is in Oslo, not Lisbon." joins
  the slot that holds Lisbon), if it says what holds (``placeable``), not a story in the past.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import asdict, dataclass

# Kinds of attribute that hold one value at a time, by the words that name them (a word matches
# when it starts with a stem written here with a trailing "*", else when it is the word).
CUES: dict[str, tuple[str, ...]] = {
    "residence": ("live", "lives", "living", "lived", "city", "town", "house", "reside*", "moved", "moving", "move",
                  "moves", "relocat*", "based", "flat", "apartment", "home", "settl*", "neighbourhood", "neighborhood",
                  "address", "rent*"),
    "work": ("work", "works", "working", "worked", "job", "jobs", "employ*", "hired", "hire", "joined",
             "join", "joins", "company", "firm", "colleague*", "coworker*", "boss", "office", "badge", "promot*",
             "position", "intern", "internship", "onboard*", "career", "salary", "startup", "contract", "offer"),
    "school": ("school", "university", "college", "studies", "studying", "student", "degree", "major",
               "campus", "enrolled"),
    "partner": ("dating", "married", "marry", "partner", "girlfriend", "boyfriend", "wife", "husband",
                "fiance", "fiancee", "engaged", "relationship"),
    "database": ("database*", "db", "dbs", "datastore", "data"),
    "car": ("car", "drives", "drive", "driving"),
    "editor": ("editor", "ide"),
    "language": ("language",),
    "cloud": ("cloud", "hosting", "hosted", "host"),
}
# Events that recur on a day: a weekday said with one of them is that event's schedule.
EVENTS = ("standup", "stand-up", "meeting", "meetings", "sync", "retro", "retrospective", "call", "class",
          "classes", "lesson", "lessons", "practice", "rehearsal", "appointment", "session", "training",
          "shift", "review", "planning", "demo", "yoga", "gym", "club", "choir", "service", "workout")
# Facts that do not change: a value said with one of them is nobody's current value of anything.
# Kept as ``stable:<kind>`` claims: never superseded, but a question about them finds them first.
STABLE: dict[str, tuple[str, ...]] = {
    "birthplace": ("born", "birth", "birthplace", "grew", "grow", "hometown", "native", "raised", "from"),
    "birthday": ("birthday",),
    "nationality": ("nationality", "citizen", "citizenship"),
    "allergy": ("allergic", "allergy", "allergies", "intolerant", "intolerance"),
}
# Two words that name a kind together ("first week at Fernwood Labs": a new job).
PHRASES: dict[tuple[str, str], str] = {
    ("first", "day"): "work", ("first", "week"): "work", ("new", "role"): "work", ("day", "job"): "work",
    ("new", "place"): "residence", ("new", "flat"): "residence", ("new", "apartment"): "residence",
}
# Words that make a sentence state nothing yet: questions are dropped before, these here.
UNSURE = ("if", "might", "maybe", "perhaps", "could", "would", "should", "planning", "plan", "plans",
          "thinking", "considering", "hope", "hoping", "wish", "wishes", "want", "wants", "wanted", "will",
          "unless", "whether", "dream", "dreams", "someday", "probably", "rumour", "rumor", "apparently")
ADDITIVE = ("also", "too", "another", "second", "additionally", "both", "plus", "besides")
# Words that end the value named after them ("left Oslo", "no longer uses MySQL", "used to live in").
ENDS = ("left", "leave", "leaving", "leaves", "quit", "quits", "dropped", "drop", "cancelled", "canceled",
        "cancel", "stopped", "rid", "laid", "resigned", "fired", "ditched", "abandoned", "retired", "sold", "former",
        "formerly", "previously", "ex")
# Words that mark a sentence as telling a change (explicit), not only a value.
CHANGES = ("moved", "moving", "relocated", "switched", "switching", "migrated", "migrating", "joined",
           "started", "starting", "new", "now", "changed", "transferred", "correction", "actually", "anymore",
           "longer", "instead", "wrong", "mistake", "fix", "update", "updated", "these")
# Products of a kind everyone names the same way: a value among them is of that kind.
KNOWN: dict[str, tuple[str, ...]] = {
    "database": ("postgresql", "postgres", "mysql", "mariadb", "sqlite", "mongodb", "mongo", "redis", "cassandra",
                 "dynamodb", "cockroachdb", "oracle", "sql server", "mssql", "elasticsearch", "opensearch",
                 "firestore", "firebase", "supabase", "neo4j", "clickhouse", "snowflake", "bigquery", "couchdb",
                 "duckdb", "timescaledb", "influxdb", "couchbase", "aurora", "spanner", "planetscale", "neon"),
    "language": ("python", "rust", "java", "javascript", "typescript", "golang", "kotlin", "swift", "ruby",
                 "php", "scala", "elixir", "haskell", "c++", "c#", "clojure", "dart", "zig", "julia", "perl"),
    "editor": ("vim", "neovim", "emacs", "vscode", "vs code", "intellij", "pycharm", "sublime", "zed", "cursor",
               "xcode", "helix", "atom", "nano", "webstorm", "goland"),
    "cloud": ("aws", "gcp", "azure", "heroku", "digitalocean", "hetzner", "vercel", "netlify", "fly.io",
              "cloudflare", "linode", "ovh"),
}
NOW = frozenset(("now", "currently", "still", "these", "nowadays", "anymore", "longer"))
PAST = frozenset("""
went met had saw got took made bought came did was were said told found left spent wrote ate drove flew ran
sent gave heard thought brought sold built paid won lost began knew felt kept held led read sat stood taught
caught fought sang swam threw wore woke became chose forgot gone seen done been
""".split())
NOT_PAST = frozenset(("based", "need", "feed", "seed", "speed", "indeed", "united", "red", "bed", "shed",
                      "married", "engaged", "interested", "excited", "tired", "used", "supposed", "employed"))
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")
# A name governed by one of these is an object or a value, not the subject.
GOVERNING = frozenset((
    "in", "at", "to", "for", "from", "on", "with", "by", "of", "into", "near", "the", "a", "an", "about",
    "like", "than", "not", "as", "via", "around", "over", "under", "onto", "toward", "towards", "between",
    "among", "without", "within", "through", "across", "behind", "after", "before", "during", "since", "until",
    "out", "left", "quit", "dropped", "joined", "visited", "called", "told", "met", "using", "uses", "use",
    "and", "or", "but",
))
FIRST_PERSON = frozenset(("i", "i'm", "i've", "i'd", "i'll", "me", "my", "mine", "we", "we're", "we've", "we'd",
                          "us", "our", "ours"))
POSSESSIVES = frozenset(("my", "our", "your", "his", "her", "their", "its"))
COPULAS = frozenset(("is", "are", "was", "'s", "remains", "became", "becomes", "changed"))
# Words a sentence starts with, capitalised only for that: never a name there.
COMMON = frozenset("""
a about above actually after again against all also although always am an and another any anyway are as at
back bad be because been before being below best better between both but by can cannot correction could
did do does doing done down during each either else even ever every everything finally first fix for from
fyi funny generally good got great guess had has have having he hello her here hers hey hi him his honestly
how however i if in indeed instead is it its just kind last lately let lol looks lunch many maybe me meanwhile
might mine more most much must my never new next nice no nobody none nor not note now of off oh ok okay on
once one only or other our ours out over own perhaps please plus pretty quick quite rather really remember
remind right same see she should since small so some someone something sometimes soon sorry still such sure
thank thanks that the their them then there these they this those though through thus to today tomorrow
tonight too turns two under until up update us very was we well were what whatever when where whether which
while who whoever why will with would wow yeah yes yesterday yet you your yours had found spent sent took
went came made saw met watched finished started moved just cannot correction small precise heads sadly
luckily anyway btw ps
""".split())
NOT_LABELS = frozenset(("correction", "update", "note", "fix", "edit", "reminder", "todo", "summary", "question",
                        "answer", "q", "a", "user", "assistant", "system", "warning", "important", "tip", "heads"))
SKIPPED_NAMES = frozenset(("i", "i'm", "i've", "i'd", "i'll", "ok", "okay", "tv", "ai", "eu", "us", "uk"))
CONNECTORS = frozenset(("and", "of", "&", "de", "du", "la", "le", "von", "van", "der", "del", "da", "di"))

# Words that name an attribute or an event: "Standup is Monday." starts with one, not with a name.
_CUE_WORDS = frozenset([s for stems in CUES.values() for s in stems if not s.endswith("*")] + list(EVENTS)
                       + [s for stems in STABLE.values() for s in stems])
_BRACKETED = re.compile(r"\[[^\]]{0,300}\]")
_LABEL = re.compile(r"\s*([A-Z][\w'’-]{1,40}(?: [A-Z][\w'’-]{1,40})?):\s")
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+|;\s*")
_LETTER = "A-Za-zÀ-ÖØ-öø-ÿ0-9"
_TOKENS = re.compile(f"[{_LETTER}][{_LETTER}'’+#.\\-&]*[{_LETTER}+#]|[{_LETTER}]|[,:]")
NO_CLAIM = "\x00"  # a value that states nothing: a day said with no event ("spent Friday debugging")
CUE_REACH = 6  # words between a value and the cue that names its attribute, at most
MAX_SENTENCES = 12  # a long memory (a pasted document) is not read for claims past its start
MAX_CHARS = 4000


@dataclass(frozen=True)
class Claim:
    """One sentence's word on one attribute of one subject."""

    subject: str  # casefolded name, or "speaker:<who>" for the one speaking
    attribute: str | None  # residence, work, schedule:standup, editor, ...; None: placed by its value
    value: str | None  # casefolded; None: it only ends ``ends``
    ends: tuple[str, ...] = ()  # values it says no longer hold ("not Lisbon", "no longer MySQL")
    additive: bool = False  # one more value, not another one ("also", "a second")
    explicit: bool = False  # told as a change ("moved", "now", "correction", "no longer")
    cue: str = ""  # the word the attribute was read from (the reason a search shows)
    # No cue named the attribute: may the store place it by its value (``placing``)? Not a story
    # told in the past ("I met Anna in Paris"), only what holds ("Maren enjoys life in Oslo").
    placeable: bool = False
    placed: bool = False  # the store placed it by its value, when it was written (less sure)


def claims_of(text: str, speaker: str | None) -> list[Claim]:
    """The claims of a memory's text, ``speaker`` being who says "I" and "we" in it (None: a
    text whose first person is nobody's, such as an assistant's turn: then only named subjects)."""
    claims: list[Claim] = []
    text = _BRACKETED.sub(" ", text[:MAX_CHARS])  # "[1:56 pm on 8 May, 2023]", "[shares a photo]": asides
    labelled = _LABEL.match(text)  # a transcript's "Caroline: I moved ...": Caroline speaks
    if labelled and not set(labelled.group(1).casefold().split()) & (COMMON | NOT_LABELS):
        speaker, text = labelled.group(1), text[labelled.end():]
    for sentence in _SENTENCES.split(text)[:MAX_SENTENCES]:
        sentence = sentence.strip()
        if not sentence or sentence.endswith("?"):
            continue
        claims.extend(_sentence_claims(sentence, speaker))
    return claims


def claims_json(claims: list[Claim]) -> str:
    """How a memory's claims are kept with its row ('' for none)."""
    return json.dumps([asdict(c) for c in claims], separators=(",", ":")) if claims else ""


def claims_from_json(text: str | None) -> list[Claim]:
    """The claims kept with a row (none for '' or NULL, or anything unreadable)."""
    if not text:
        return []
    try:
        raw = json.loads(text)
    except ValueError:
        return []
    out: list[Claim] = []
    for c in raw if isinstance(raw, list) else []:
        if isinstance(c, dict) and isinstance(c.get("subject"), str):
            out.append(Claim(c["subject"], c.get("attribute"), c.get("value"), tuple(c.get("ends") or ()),
                             bool(c.get("additive")), bool(c.get("explicit")), str(c.get("cue") or ""),
                             bool(c.get("placeable")), bool(c.get("placed"))))
    return out


def speaker_subject(speaker: str) -> str:
    return f"speaker:{' '.join(speaker.casefold().split())}"


@dataclass
class _Token:
    text: str
    low: str
    at: int


def _sentence_claims(sentence: str, speaker: str | None) -> list[Claim]:
    tokens = [_Token(t, t.casefold().replace("’", "'"), i) for i, t in enumerate(_TOKENS.findall(sentence))]
    words = [t.low for t in tokens]
    if any(w in UNSURE for w in words) or "going to" in " ".join(words):
        return []
    names = _names(tokens)
    subject_name, values = _subject_and_values(tokens, names)
    if subject_name is not None:
        subject = subject_name
    elif speaker is not None:
        subject = speaker_subject(speaker)
    else:
        return []
    values += [(t.at, t.low.removesuffix("s") if t.low.removesuffix("s") in WEEKDAYS else t.low)
               for t in tokens if t.low in WEEKDAYS or t.low.removesuffix("s") in WEEKDAYS]
    values += [(t.at, t.low) for t in tokens if _known_kind(t.low) and not t.text[:1].isupper()]
    stable_words = [(t.at, kind) for t in tokens for kind, stems in STABLE.items()
                    if t.low in stems and t.low != "from"]
    if stable_words and not values:  # "Maren is allergic to peanuts": a stable fact named by its kind alone
        return [Claim(subject, f"stable:{stable_words[0][1]}", None, cue=stable_words[0][1])]
    values = sorted(set(values))
    if not values:
        return []
    stable = [(t.at, kind) for t in tokens for kind, stems in STABLE.items()
              if t.low in stems and (t.low != "from" or _copula_before(words, t.at))]
    explicit = any(w in CHANGES for w in words) or "not" in words
    placeable = not _told_in_the_past(words) or any(w in NOW for w in words)
    additive = any(w in ADDITIVE for w in words) or "as well" in " ".join(words)
    ends = _ended(words, values)
    claims: list[Claim] = []
    for at, value in values:
        if value == subject:
            continue
        near = [kind for s, kind in stable if abs(at - s) <= 4]
        if near:
            claims.append(Claim(subject, f"stable:{near[0]}", value, cue=near[0]))
            continue
        attribute, cue = _attribute(tokens, at, value)
        if attribute == NO_CLAIM:
            # A day with no event is a time ("see you on Monday"), unless it is what something is
            # ("actually it's Tuesday now"): then the write may place it by the kind of its value.
            if not (placeable and _said_to_be(words, at)):
                continue
            attribute = None
        if value in ends:
            # An end is placeable in any tense: "Maren left Oslo" says what no longer holds.
            claims.append(Claim(subject, attribute, None, (value,), False, True, cue or "no longer", attribute is None))
        else:
            placed = placeable and attribute is None
            claims.append(Claim(subject, attribute, value, (), additive, explicit, cue, placed))
    # "X, not Y": the ended value belongs to the stated one's claim (a correction), not a claim of its own.
    stated = [c for c in claims if c.value is not None and not (c.attribute or "").startswith("stable:")]
    ended_claims = [c for c in claims if c.value is None]
    if len(stated) == 1 and ended_claims:
        only = stated[0]
        attribute = only.attribute or next((c.attribute for c in ended_claims if c.attribute), None)
        ended = tuple(v for c in ended_claims for v in c.ends)
        rest = [c for c in claims if c is not only and c not in ended_claims]
        return [*rest, Claim(subject, attribute, only.value, ended, False, True, only.cue or "correction")]
    return claims


def _names(tokens: list[_Token]) -> list[tuple[int, int, str]]:
    """Runs of capitalised words (start, end, casefolded text), joined across "and"/"of"/"de"..."""
    names: list[tuple[int, int, str]] = []
    i = 0
    while i < len(tokens):
        if not _capitalised(tokens, i):
            i += 1
            continue
        j = i + 1
        while j < len(tokens) and not tokens[j - 1].low.endswith("'s"):  # "Kwame's Monday standup"
            if tokens[j].low.removesuffix("s") in WEEKDAYS or tokens[j].low in MONTHS:
                break
            if _capitalised(tokens, j):
                j += 1
            elif tokens[j].low in CONNECTORS and j + 1 < len(tokens) and _capitalised(tokens, j + 1):
                j += 2
            else:
                break
        text = " ".join(t.low for t in tokens[i:j]).removesuffix("'s")
        if not _known_kind(text):
            text = text.rstrip("+#.-&'")
        if text not in SKIPPED_NAMES and text not in MONTHS and text not in WEEKDAYS \
                and text.removesuffix("s") not in WEEKDAYS:
            names.append((i, j, text))
        i = j
    return names


def _capitalised(tokens: list[_Token], i: int) -> bool:
    text = tokens[i].text
    if text in (",", ":") or not text[:1].isalpha():
        return False
    upper = text[:1].isupper() or any(ch.isupper() for ch in text[1:])
    if not upper:
        return False
    clause_start = i == 0 or tokens[i - 1].text in (",", ":")
    word = tokens[i].low.removesuffix("'s")
    return not (clause_start and (word in COMMON or word in _CUE_WORDS))


def _subject_and_values(
    tokens: list[_Token], names: list[tuple[int, int, str]],
) -> tuple[str | None, list[tuple[int, str]]]:
    subject: str | None = None
    values: list[tuple[int, str]] = []
    for start, end, text in names:
        before = tokens[start - 1].low if start else ""
        vocative = (start == 0 or tokens[start - 1].text in (",", ":")) and end < len(tokens) \
            and tokens[end].text == "," and start == 0 and len(names) > 1
        clause = max((i for i in range(start) if tokens[i].text in (",", ":")), default=-1) + 1
        first_person_before = any(t.low in FIRST_PERSON for t in tokens[clause:start])
        if subject is None and not vocative and before not in GOVERNING and not first_person_before:
            subject = text
        elif not vocative:
            values.append((start, text))
    return subject, values


def _told_in_the_past(words: list[str]) -> bool:
    """A sentence in the simple past ("went", "met", "visited"): a story, not what holds."""
    return any(w in PAST or (w.endswith("ed") and len(w) > 4 and w not in NOT_PAST) for w in words)


def _said_to_be(words: list[str], at: int) -> bool:
    """"it's Tuesday", "is on Tuesday": the word at ``at`` is what something is."""
    before = [w for w in words[max(0, at - 2):at] if w != "on"]
    return bool(before) and (before[-1] in ("is", "are", "'s") or before[-1].endswith("'s"))


def _copula_before(words: list[str], at: int) -> bool:
    return at > 0 and words[at - 1] in ("is", "are", "was", "comes", "come", "originally", "'s")


def _ended(words: list[str], values: list[tuple[int, str]]) -> set[str]:
    """The values a sentence says no longer hold: after "no longer", "used to", an ending verb
    ("left", "dropped"), "not", "instead of", "rather than", or the "from" of "from X to Y"."""
    ended: set[str] = set()
    for i, w in enumerate(words):
        after = [v for at, v in values if at > i]
        if not after:
            continue
        nearest = [v for at, v in values if i < at <= i + 4]
        if (w == "longer" and i and words[i - 1] == "no") or (w == "used" and i + 1 < len(words)
                                                               and words[i + 1] == "to"):
            ended.update(after)
        elif w in ENDS or ((w == "not" or w.endswith("n't")) and i + 1 < len(words) and words[i + 1] != "only"):
            ended.update(nearest[:1])
        elif (w == "instead" and words[i + 1: i + 2] == ["of"]) or (w == "rather" and words[i + 1: i + 2] == ["than"]):
            ended.update(nearest[:1])
        elif w == "from" and "to" in words[i + 2:]:
            ended.update(nearest[:1])
        elif w in ("away", "out") and words[i + 1: i + 2] in (["from"], ["of"]):
            ended.update(nearest[:1])
    return ended


def _known_kind(value: str) -> str | None:
    for kind, known in KNOWN.items():
        if value in known:
            return kind
    return None


def _attribute(tokens: list[_Token], at: int, value: str) -> tuple[str | None, str]:
    """The attribute a value at token ``at`` is said of, and the word that says so."""
    if value in WEEKDAYS:
        events = [t for t in tokens if (t.low.removesuffix("s") in EVENTS or t.low in EVENTS)
                  and abs(t.at - at) <= CUE_REACH + 2]
        if events:
            nearest = min(events, key=lambda t: abs(t.at - at))
            event = nearest.low if nearest.low in EVENTS else nearest.low.removesuffix("s")
            return f"schedule:{event.replace('-', '')}", nearest.text
        return NO_CLAIM, ""
    known = _known_kind(value)
    best: tuple[int, str, str] | None = None
    for t in tokens:
        for kind, stems in CUES.items():
            if any(t.low == s or (s.endswith("*") and t.low.startswith(s[:-1])) for s in stems):
                distance = abs(t.at - at)
                if distance <= CUE_REACH and (best is None or distance < best[0]):
                    best = (distance, kind, t.text)
    for a, b in zip(tokens, tokens[1:], strict=False):
        phrased = PHRASES.get((a.low, b.low))
        if phrased is not None and abs(b.at - at) <= CUE_REACH and (best is None or abs(b.at - at) < best[0]):
            best = (abs(b.at - at), phrased, f"{a.text} {b.text}")
    if known is not None and (best is None or best[1] not in (known, "work")):
        return known, value
    if best is not None:
        return best[1], best[2]
    if known is not None:
        return known, value
    return _possessive_frame(tokens, at)


def _possessive_frame(tokens: list[_Token], at: int) -> tuple[str | None, str]:
    """"my editor is Neovim", "Maren's favourite café is Lumen": the noun before the copula."""
    for i, t in enumerate(tokens[:at]):
        if t.low in POSSESSIVES or t.low.endswith("'s"):
            frame = [x.low for x in tokens[i + 1: at]]
            for j, w in enumerate(frame):
                if w in COPULAS and j > 0:
                    noun = frame[j - 1]
                    if noun.isalpha() and noun not in COMMON:
                        return noun, tokens[i + 1 + j - 1].text
    return None, ""


def claims_read(kind: str, role: str | None, actor: str | None, content: str) -> list[Claim]:
    """What a memory claims: a note's "I" is the user's, a turn's its speaker's (the actor a chat
    names, else the user); an assistant's turn states only what it says of someone named;
    summaries, facts (``fact_rules`` supersedes those), tool results and system turns state
    nothing here."""
    if kind == "note":
        return claims_of(content, actor or "user")
    if kind != "message" or role not in ("user", "assistant"):
        return []
    return claims_of(content, (actor or "user") if role == "user" else None)


_PAST = re.compile(
    r"\b(before|previous(ly)?|used to|earlier|formerly|former|prior|originally|in the past|history|"
    r"old|until|at first|back then|no longer)\b", re.IGNORECASE,
)


def asks_about_the_past(query: str) -> bool:
    """Whether a question asks what held before ("where did Maren live before Oslo?", "what did we
    use previously"): then a search puts each statement's predecessors right after it."""
    return bool(_PAST.search(query))


ANY_SPEAKER = "speaker:*"  # a question in the first person, or about "the user": whoever speaks in the store


@functools.lru_cache(maxsize=512)
def asked_of(query: str) -> tuple[frozenset[str], frozenset[str]]:
    """Whom a question asks about and which of their attributes ("Where does Maren live now?":
    ``maren``, ``residence``; "What day is our standup?": ``ANY_SPEAKER``, ``schedule:standup``;
    "Where was Maren born?": ``stable:birthplace``): a search puts the statements of exactly that
    first. Empty sets when it names no one or nothing of them. Read once a query (~0.1 ms): a
    search asks it twice, for how many candidates to rank and for which to put first."""
    tokens = [_Token(t, t.casefold().replace("’", "'"), i) for i, t in enumerate(_TOKENS.findall(query))]
    subjects = {text for _, _, text in _names(tokens)}
    subjects |= {speaker_subject(s) for s in list(subjects)}
    if any(t.low in FIRST_PERSON or t.low in ("user", "user's") for t in tokens):
        subjects.add(ANY_SPEAKER)
    attributes: set[str] = set()
    for t in tokens:
        attributes.update(kind for kind, stems in CUES.items()
                          if any(t.low == s or (s.endswith("*") and t.low.startswith(s[:-1])) for s in stems))
        attributes.update(f"stable:{kind}" for kind, stems in STABLE.items() if t.low in stems
                          and (t.low != "from" or t.at == len(tokens) - 1))  # "Where is Maren from?"
        if t.low in EVENTS or t.low.removesuffix("s") in EVENTS:
            event = t.low if t.low in EVENTS else t.low.removesuffix("s")
            attributes.add(f"schedule:{event.replace('-', '')}")
    attributes.update(kind for (a, b), kind in PHRASES.items() if f"{a} {b}" in query.casefold())
    return frozenset(subjects), frozenset(attributes)
