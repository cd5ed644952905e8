package joinscript

import (
	"bytes"
	_ "embed"
	"text/template"
)

//go:embed join-node.sh.tmpl
var source string

var script = template.Must(template.New("join-node.sh").Delims("{{", "}}").Parse(source))

// Render returns join-node.sh for a master whose public listener is on
// port (the default of MASTER_URL; MASTER_IP and MASTER_PIN come from the
// join command). With tls the script refuses to run without MASTER_PIN
// rather than fall back to plain HTTP.
func Render(port int, tls bool) []byte {
	var b bytes.Buffer
	if err := script.Execute(&b, struct {
		Port int
		TLS  bool
	}{port, tls}); err != nil {
		panic(err) // the template is ours and takes only Port and TLS
	}
	return b.Bytes()
}
