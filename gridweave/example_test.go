package gridweave_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"gridweave.dev/gridweave"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/memstore"
	"gridweave.dev/mesh/memmesh"
	"gridweave.dev/mesh/wgkey"
	"gridweave.dev/rayctl/rayctltest"
)

// The service in another Go program, on in-memory backends: the ledger in
// memory, peers in memory, KubeRay's and client-go's fake clientsets.
func Example() {
	ctx := context.Background()
	cfg := gridweave.DefaultConfig() // the documented defaults
	cfg.AdminToken, cfg.JWTSecret = "an-admin-token-of-32-characters!", "a-jwt-secret-of-at-least-32-bytes"

	pool, _ := joinkeys.NewPool(cfg.VPNCIDR, cfg.MasterVPNIP)
	keyring, _ := joinkeys.New(new(memstore.Store), &joinkeys.Options{JWTSecret: []byte(cfg.JWTSecret), Pool: pool})
	_, masterKey, _ := wgkey.GeneratePair()
	cluster, _ := rayctltest.NewFakes(cfg.Namespace)
	server, err := gridweave.New(ctx, cfg, gridweave.Backends{
		Keyring: keyring, Mesh: memmesh.New(masterKey), Ray: cluster.Client, Kube: cluster.Kube,
	})
	if err != nil {
		panic(err)
	}
	web := httptest.NewServer(server.Handler())
	defer web.Close()

	req, _ := http.NewRequest("POST", web.URL+"/v1/nodes/join-keys", strings.NewReader(`{"kind":"org","org":"acme","ttl_seconds":3600}`))
	req.Header.Set("Authorization", "Bearer "+cfg.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, _ := http.DefaultClient.Do(req)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, strings.Contains(string(body), `"join_command":"d=$(mktemp -d) && curl -fsSL http://<MASTER_IP>:8800/join-node.sh`))
	// Output: 201 true
}
