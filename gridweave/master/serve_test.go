package master

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"gridweave.dev/gridweave"
)

// TestPlaceAgents: the agents built into the binary are written beside
// the ledger and served from there; AGENT_DIR overrides them.
func TestPlaceAgents(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	embedded := fstest.MapFS{"join-node-linux-amd64": {Data: []byte("amd64 agent")}, "join-node-linux-arm64": {Data: []byte("arm64 agent")}}
	cfg := gridweave.Config{DBPath: filepath.Join(t.TempDir(), "kuberay.db")}
	if err := PlaceAgents(&cfg, embedded, log); err != nil {
		t.Fatal(err)
	}
	if cfg.AgentDir != filepath.Join(filepath.Dir(cfg.DBPath), "agents") {
		t.Fatalf("AgentDir %q", cfg.AgentDir)
	}
	for name, f := range embedded {
		got, err := os.ReadFile(filepath.Join(cfg.AgentDir, name))
		if err != nil || string(got) != string(f.Data) {
			t.Errorf("%s: %q, %v", name, got, err)
		}
	}
	embedded["join-node-linux-amd64"] = &fstest.MapFile{Data: []byte("a newer amd64 agent")}
	cfg.AgentDir = ""
	if err := PlaceAgents(&cfg, embedded, log); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(cfg.AgentDir, "join-node-linux-amd64")); string(got) != "a newer amd64 agent" {
		t.Errorf("after an update the agent is %q", got)
	}
	own := gridweave.Config{DBPath: cfg.DBPath, AgentDir: "/opt/agents"}
	if err := PlaceAgents(&own, embedded, log); err != nil || own.AgentDir != "/opt/agents" {
		t.Errorf("AGENT_DIR set: %q, %v", own.AgentDir, err)
	}
	none := gridweave.Config{DBPath: cfg.DBPath}
	if err := PlaceAgents(&none, nil, log); err != nil || none.AgentDir != "" {
		t.Errorf("a binary without agents: %q, %v", none.AgentDir, err)
	}
}
