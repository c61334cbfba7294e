package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=…"; without
// it the module version from the build information is shown.
var version = ""

func newVersionCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print htq's version and the commit it was built from",
		Long:    "version prints what htq --version prints: the module version, the commit (with \", modified\" when the tree had changes), the Go version and the platform.",
		Example: "  htq version\n  htq --version",
		Args:    noArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintf(stdout, "htq %s\n", versionString())
			return err
		},
	}
}

// versionString describes this binary: "v1.2.0 (commit 0123456789ab,
// modified) go1.26.0 linux/amd64".
func versionString() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	return versionOf(version, info, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH)
}

// moduleVersion is the version given at link time, else the main
// module's, else "" (an untagged build), as the service.version of htq
// serve's spans.
func moduleVersion() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return ""
}

// versionOf describes a build: the version given at link time, else the
// main module's (a tagged `go install …@v1.2.0` or a build in a checkout
// at a tag records it; a build of an untagged tree records a
// pseudo-version, or "(devel)" without VCS stamping, shown as "devel"),
// then the VCS revision and whether the tree was modified.
func versionOf(linked string, info *debug.BuildInfo, goVersion, platform string) string {
	v := linked
	if v == "" && info != nil && info.Main.Version != "" && info.Main.Version != "(devel)" {
		v = info.Main.Version
	}
	if v == "" {
		v = "devel"
	}
	var rev string
	var modified bool
	if info != nil {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	var parts []string
	if rev != "" {
		parts = append(parts, "commit "+rev[:min(12, len(rev))])
		if modified {
			parts = append(parts, "modified")
		}
	}
	if len(parts) > 0 {
		v += " (" + strings.Join(parts, ", ") + ")"
	}
	return v + " " + goVersion + " " + platform
}
