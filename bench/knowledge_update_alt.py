"""A second wording of the knowledge-update stream (``knowledge_update.py --wording alt``): other
people, other values, other attributes' words, the user's own facts in the first person ("I
relocated to ..."), written after the rules were, to see how far they carry beyond the wording they
were built on. Not a held-out set (the same people wrote both); read it as a robustness check."""

from __future__ import annotations

PEOPLE = ["Wendell", "Ottilie", "Bruno", "Signe", "Amadou", "Yara", "Leopold", "Mirela", "Tomasz", "Hedda",
          "Cyprian", "Noor"]
OTHERS = ["Fenna", "Radek", "Solveig", "Emeka", "Ines", "Vasco", "Greta", "Luka"]
ME = "I"  # the user, in the first person: one of the subjects speaks of themself
VALUES = {
    "city": ["Utrecht", "Bilbao", "Gdansk", "Aarhus", "Graz", "Nantes", "Trieste", "Tampere", "Leeds", "Brno",
             "Malmo", "Cork"],
    "employer": ["Vantor Systems", "Bluefinch Media", "Ostrava Robotics", "Kestrel Insurance", "Palisade Labs",
                 "Greyhaven Studio", "Corvid Analytics", "Ambergate Retail"],
    "database": ["Redis", "Cassandra", "Neo4j", "ClickHouse", "Elasticsearch", "Firestore", "DuckDB"],
    "standup": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"],
}
SAID = {
    "city": {
        "stated": ["{s} relocated to {v}.", "{s} has an apartment in {v} now.", "{s} bought a house in {v}."],
        "implied": ["{s} registered at the town hall in {v} last week.", "{s} is still unpacking boxes in the "
                    "new flat in {v}."],
        "corrected": ["Sorry, I misspoke: {s} lives in {v}, not {old}.", "Let me fix that, {s} is living in {v} "
                      "rather than {old}."],
        "ended": ["{s} moved out of {old}.", "{s} does not live in {old} anymore."],
        "again": ["{s} is enjoying life in {v}.", "{s} keeps praising the food in {v}."],
        "current": ["Which city does {s} call home?", "Where is {s} living these days?", "In which town does {s} "
                    "reside?"],
        "before": ["Where was {s} living before {v}?", "Which city did {s} live in prior to {v}?"],
    },
    "employer": {
        "stated": ["{s} joined {v}.", "{s} took a position at {v}.", "{s} is now working for {v}."],
        "implied": ["{s} spent the first day at {v} setting up accounts.", "{s} is onboarding at {v} this week."],
        "corrected": ["Let me correct that: {s} works for {v}, not {old}.", "Actually {s}'s job is at {v}, not "
                      "{old}."],
        "ended": ["{s} quit {old}.", "{s} is no longer employed at {old}."],
        "again": ["{s} enjoys the people at {v}.", "{s} had a good review at {v}."],
        "current": ["Which company is {s} working for?", "Who employs {s} now?", "What is {s}'s current job?"],
        "before": ["Which company did {s} work for before {v}?", "Who employed {s} prior to {v}?"],
    },
    "database": {
        "stated": ["{s}'s team stores its data in {v}.", "{s}'s team switched its database to {v}."],
        "implied": ["{s} wrote the backup scripts for the team's {v} cluster.", "{s} spent Friday debugging "
                    "slow {v} queries."],
        "corrected": ["Correction: {s}'s team is running {v}, not {old}.", "I was wrong earlier, {s}'s team "
                      "relies on {v} rather than {old}."],
        "ended": ["{s}'s team stopped using {old}.", "{s}'s team got rid of {old}."],
        "again": ["{s}'s team is pleased with {v}.", "{s} says {v} keeps up with the load."],
        "current": ["Which database is {s}'s team running?", "Where does {s}'s team store its data?"],
        "before": ["Which database did {s}'s team use before {v}?", "What did {s}'s team store data in prior to "
                   "{v}?"],
    },
    "standup": {
        "stated": ["{s}'s weekly sync happens on {v}.", "{s}'s team meets for the sync every {v}."],
        "implied": ["{s} blocks {v} mornings for the team sync.", "{s} moved the dentist visit because {v} "
                    "is sync day."],
        "corrected": ["Correction: {s}'s sync is on {v}, not {old}.", "My mistake, {s}'s team syncs on {v} "
                      "rather than {old}."],
        "ended": ["{s}'s team dropped the {old} sync.", "{s}'s team no longer syncs on {old}."],
        "again": ["{s}'s {v} sync went well.", "{s} prepared slides for the {v} sync."],
        "current": ["Which day is {s}'s weekly sync?", "On what day does {s}'s team sync?"],
        "before": ["Which day was {s}'s sync before {v}?", "What day did {s}'s team sync on prior to {v}?"],
    },
}
STABLE = {
    "born": (["{s} was born and raised in {v}.", "{s}'s birthplace is {v}."], "In which city was {s} born?",
             VALUES["city"]),
    "allergy": (["{s} cannot eat {v} because of an allergy.", "{s} is allergic to {v}."],
                "Which allergy does {s} have?", ["walnuts", "kiwi", "soy", "gluten", "mustard", "celery"]),
    "language": (["{s} is a native {v} speaker.", "{s} grew up speaking {v}."], "What is {s}'s native language?",
                 ["Dutch", "Basque", "Polish", "Danish", "Finnish", "Czech"]),
}
CHATTER = ["The printer jammed twice today.", "Our neighbour's dog barked all night.", "I tried a new pasta recipe.",
           "The bus was packed this morning.", "We cleaned out the garage.", "My headphones broke again.",
           "The power went out for an hour.", "I signed up for a pottery class."]
# The user in the first person: how "I" says each change, and asks about it.
FIRST = {
    "city": ("I relocated to {v}.", "Where do I live now?", "Where did I live before {v}?"),
    "employer": ("I joined {v}.", "Which company do I work for?", "Which company did I work for before {v}?"),
    "database": ("Our team switched its database to {v}.", "Which database does our team use?",
                 "Which database did our team use before {v}?"),
    "standup": ("Our weekly sync happens on {v}.", "Which day is our weekly sync?",
                "Which day was our sync before {v}?"),
}
