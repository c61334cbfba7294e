// Command htq is the htq task-queue service and its command line:
// `htq serve` runs the HTTP API, the URL worker and the schedule
// runner (see docs/configuration.md); `htq recover SRC DST` copies what can
// be read from a damaged embedded data directory into a new one; the other
// commands manage a running service over its API (docs/cli.md).
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
