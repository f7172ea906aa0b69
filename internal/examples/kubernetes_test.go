package examples

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKubernetesReadinessIsNotLeadership checks every probe of the
// Kubernetes examples: readiness on /leader would leave the standbys never
// Ready, so that a rollout never completes. examples/kubernetes.yaml must
// probe /healthz for both readiness and liveness.
func TestKubernetesReadinessIsNotLeadership(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "kubernetes*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples/kubernetes*.yaml found (%v)", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(file)
		probes := probePaths(string(data))
		for probe, paths := range probes {
			for _, path := range paths {
				if path == "/leader" {
					t.Errorf("%s: %s uses /leader: only the leader would be Ready and rollouts would never complete", name, probe)
				}
			}
		}
		if name == "kubernetes.yaml" {
			for _, probe := range []string{"readinessProbe", "livenessProbe"} {
				if paths := probes[probe]; len(paths) != 1 || paths[0] != "/healthz" {
					t.Errorf("%s: %s paths %q, want one on /healthz", name, probe, paths)
				}
			}
		}
	}
}

// probePaths returns the httpGet paths of each kind of probe in a YAML
// file (readinessProbe, livenessProbe, startupProbe): the path lines
// indented under the probe's key.
func probePaths(yaml string) map[string][]string {
	probes := map[string][]string{}
	probe, indent := "", 0
	for _, line := range strings.Split(yaml, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		depth := len(line) - len(strings.TrimLeft(line, " "))
		if probe != "" && depth <= indent {
			probe = ""
		}
		for _, kind := range []string{"readinessProbe", "livenessProbe", "startupProbe"} {
			if strings.HasPrefix(trimmed, kind+":") {
				probe, indent = kind, depth
			}
		}
		if probe != "" && strings.HasPrefix(trimmed, "path:") {
			probes[probe] = append(probes[probe], strings.Trim(strings.TrimSpace(strings.TrimPrefix(trimmed, "path:")), `"'`))
		}
	}
	return probes
}
