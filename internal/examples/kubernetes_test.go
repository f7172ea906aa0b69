package examples

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKubernetesReadinessIsNotLeadership checks every probe of the
// Kubernetes examples: readiness on /leader would leave the standbys never
// Ready, so that a rollout never completes; liveness on /readyz or
// /healthz, which fail while the database is out of reach, would restart
// every replica through a database outage. examples/kubernetes.yaml must
// probe /readyz for readiness and /livez for liveness.
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
		// A CronJob's pods are not long-running: they have no probes.
		if paths := probes["livenessProbe"]; name != "kubernetes-cronjob.yaml" && (len(paths) != 1 || paths[0] != "/livez") {
			t.Errorf("%s: livenessProbe paths %q, want one on /livez: a database outage must not restart the replicas", name, paths)
		}
		if paths := probes["readinessProbe"]; name == "kubernetes.yaml" && (len(paths) != 1 || paths[0] != "/readyz") {
			t.Errorf("%s: readinessProbe paths %q, want one on /readyz", name, paths)
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
