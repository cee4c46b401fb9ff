#!/bin/bash
# The reference solution.
mkdir -p /app/site && echo '<h1>Welcome</h1>' > /app/site/index.html
printf '#!/bin/bash\nexec python3 -m http.server "$1" --bind 127.0.0.1 --directory /app/site\n' > /app/serve.sh
chmod +x /app/serve.sh
