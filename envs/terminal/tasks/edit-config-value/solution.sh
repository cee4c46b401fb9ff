#!/bin/bash
# The reference solution.
python3 - <<'END'
import re
p = "/app/config.ini"
text = open(p).read()
head, sep, rest = text.partition("[database]\n")
rest = re.sub(r"^host = localhost$", "host = db.internal", rest, count=1, flags=re.M)
open(p, "w").write(head + sep + rest)
END
