package version

import (
	"runtime/debug"
	"testing"
)

// A build without a release's version says the module's version, else the
// commit Go recorded, its time and whether the tree was modified.
func TestFromBuildInfo(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	const rev = "5eb13ac0e1f2a3b4c5d6e7f8091a2b3c4d5e6f70"
	for _, tc := range []struct {
		name string
		info *debug.BuildInfo
		want string
	}{
		{"no build info", nil, "(devel)"},
		{"module version", &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}, Settings: vcs("vcs.revision", rev)}, "v1.4.0"},
		{"devel, no vcs", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "(devel)"},
		{"devel, clean", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs", "git", "vcs.revision", rev, "vcs.time", "2026-12-07T17:30:00Z", "vcs.modified", "false")},
			"devel+5eb13ac (2026-12-07T17:30:00Z)"},
		{"devel, modified", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs", "git", "vcs.revision", rev, "vcs.time", "2026-12-07T17:30:00Z", "vcs.modified", "true")},
			"devel+5eb13ac (2026-12-07T17:30:00Z, modified)"},
		{"empty version, revision only", &debug.BuildInfo{Settings: vcs("vcs.revision", "5eb13")}, "devel+5eb13"},
	} {
		if got := fromBuildInfo(tc.info); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// A release's -ldflags version wins over what Go recorded.
func TestReleaseVersionWins(t *testing.T) {
	defer func(v string) { buildVersion = v }(buildVersion)
	buildVersion = "1.2.3"
	if got := String(); got != "1.2.3" {
		t.Errorf("got %q, want 1.2.3", got)
	}
}
