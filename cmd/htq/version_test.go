package main

import (
	"runtime/debug"
	"testing"
)

func TestVersionOf(t *testing.T) {
	info := func(v string, settings ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/htqueue/htq", Version: v}}
		for i := 0; i+1 < len(settings); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return bi
	}
	const rev = "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		linked string
		info   *debug.BuildInfo
		want   string
	}{
		{"", info("v1.2.0"), "v1.2.0 go1.26 linux/amd64"},
		{"", info("v1.2.0", "vcs.revision", rev, "vcs.modified", "false"), "v1.2.0 (commit 0123456789ab) go1.26 linux/amd64"},
		{"", info("v1.2.1-0.20261201100000-0123456789ab+dirty", "vcs.revision", rev, "vcs.modified", "true"),
			"v1.2.1-0.20261201100000-0123456789ab+dirty (commit 0123456789ab, modified) go1.26 linux/amd64"},
		{"", info("(devel)", "vcs.revision", rev), "devel (commit 0123456789ab) go1.26 linux/amd64"},
		{"", info("(devel)"), "devel go1.26 linux/amd64"},
		{"", nil, "devel go1.26 linux/amd64"},
		{"v2.0.0-rc1", info("(devel)", "vcs.revision", "abc"), "v2.0.0-rc1 (commit abc) go1.26 linux/amd64"},
	} {
		if got := versionOf(tc.linked, tc.info, "go1.26", "linux/amd64"); got != tc.want {
			t.Errorf("versionOf(%q, %+v) = %q; want %q", tc.linked, tc.info, got, tc.want)
		}
	}
}
