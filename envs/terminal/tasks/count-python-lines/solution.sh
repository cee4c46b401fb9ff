#!/bin/bash
# The reference solution.
cat > /app/pyloc.sh <<'END'
#!/bin/bash
find "$1" -type f -name '*.py' -print0 | xargs -0 cat -- 2>/dev/null | wc -l
END
chmod +x /app/pyloc.sh
