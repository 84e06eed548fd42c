package kafkron

// Client security of every Kafka client of the Go worker, from the same settings as
// the Python worker's (topics/security.py): the environment, or a client config file
// with Kafka's own property names (the file Kafka's tools take as --command-config).
//
//	environment                  Kafka property (KAFKRON_CLIENT_CONFIG file)
//	KAFKRON_SECURITY_PROTOCOL    security.protocol
//	KAFKRON_SASL_MECHANISM       sasl.mechanism
//	KAFKRON_SASL_USERNAME        username="..." of sasl.jaas.config
//	KAFKRON_SASL_PASSWORD_FILE   password="..." of sasl.jaas.config
//	KAFKRON_SSL_CAFILE           ssl.truststore.location (type PEM)
//	KAFKRON_CLIENT_CONFIG        the file itself
//
// An environment variable wins over the file. The password is only ever read from a
// file (never an argument, so ps never shows it) and never put in an error message.
// With nothing set the protocol is PLAINTEXT and no option is added.

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

var (
	securityProtocols  = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}
	securityMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
	jaasOption         = regexp.MustCompile(`(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"`)
	jaasEscape         = regexp.MustCompile(`\\(.)`)
	propertyLine       = regexp.MustCompile(`^([^=:\s]+)\s*[=:]?\s*(.*)$`)
)

// Security is how the worker's clients authenticate and what they trust.
type Security struct {
	Protocol  string
	Mechanism string
	Username  string
	password  string // never printed
	CAFile    string
}

func (s Security) usesSASL() bool { return strings.HasPrefix(s.Protocol, "SASL_") }

func (s Security) usesTLS() bool { return s.Protocol == "SSL" || s.Protocol == "SASL_SSL" }

// String never shows the password.
func (s Security) String() string {
	if s.usesSASL() {
		return fmt.Sprintf("%s %s as %s", s.Protocol, s.Mechanism, s.Username)
	}
	return s.Protocol
}

// ParseProperties reads Java .properties as Kafka's tools do: key=value or key: value,
// comments (#, !) and blank lines skipped, a trailing backslash continues a line.
func ParseProperties(text string) map[string]string {
	props := map[string]string{}
	pending := ""
	put := func(line string) {
		if m := propertyLine.FindStringSubmatch(line); m != nil {
			props[m[1]] = strings.TrimSpace(m[2])
		}
	}
	for _, raw := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		line := strings.TrimSpace(raw)
		if pending != "" {
			line = strings.TrimLeft(raw, " \t")
		}
		if pending == "" && (line == "" || line[0] == '#' || line[0] == '!') {
			continue
		}
		if strings.HasSuffix(line, `\`) && !strings.HasSuffix(line, `\\`) {
			pending += line[:len(line)-1]
			continue
		}
		line, pending = pending+line, ""
		put(line)
	}
	if pending != "" {
		put(pending)
	}
	return props
}

func fromProperties(props map[string]string, source string, s *Security) error {
	if v, ok := props["security.protocol"]; ok {
		s.Protocol = strings.ToUpper(v)
	}
	if v, ok := props["sasl.mechanism"]; ok {
		s.Mechanism = strings.ToUpper(v)
	}
	if jaas := props["sasl.jaas.config"]; jaas != "" {
		// Kafka reads JAAS values with java.io.StreamTokenizer: a backslash escapes the next char.
		for _, m := range jaasOption.FindAllStringSubmatch(jaas, -1) {
			value := jaasEscape.ReplaceAllString(m[2], "$1")
			switch m[1] {
			case "username":
				s.Username = value
			case "password":
				s.password = value
			}
		}
	}
	if location := props["ssl.truststore.location"]; location != "" {
		kind := strings.ToUpper(props["ssl.truststore.type"])
		if kind == "" {
			kind = "JKS"
		}
		if kind != "PEM" {
			return fmt.Errorf("%s: ssl.truststore.type is %s; kafkron's client reads PEM certificates only: "+
				"set ssl.truststore.type=PEM and point ssl.truststore.location at the CA's .pem file", source, kind)
		}
		s.CAFile = location
	}
	return nil
}

func expandHome(path string) string {
	if strings.HasPrefix(path, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return home + path[1:]
		}
	}
	return path
}

// LoadSecurity reads the settings: the client config file, then the environment over it.
func LoadSecurity(getenv func(string) string) (Security, error) {
	s := Security{Protocol: "PLAINTEXT", Mechanism: "PLAIN"}
	if path := getenv("KAFKRON_CLIENT_CONFIG"); path != "" {
		text, err := os.ReadFile(expandHome(path))
		if err != nil {
			return s, fmt.Errorf("client config %s: cannot read it (%v)", path, unwrapPath(err))
		}
		if err := fromProperties(ParseProperties(string(text)), path, &s); err != nil {
			return s, err
		}
	}
	if v := getenv("KAFKRON_SECURITY_PROTOCOL"); v != "" {
		s.Protocol = strings.ToUpper(v)
	}
	if v := getenv("KAFKRON_SASL_MECHANISM"); v != "" {
		s.Mechanism = strings.ToUpper(v)
	}
	if v := getenv("KAFKRON_SASL_USERNAME"); v != "" {
		s.Username = v
	}
	if v := getenv("KAFKRON_SSL_CAFILE"); v != "" {
		s.CAFile = v
	}
	if path := getenv("KAFKRON_SASL_PASSWORD_FILE"); path != "" {
		text, err := os.ReadFile(expandHome(path))
		if err != nil {
			return s, fmt.Errorf("KAFKRON_SASL_PASSWORD_FILE %s: cannot read it (%v)", path, unwrapPath(err))
		}
		s.password = strings.TrimRight(string(text), "\r\n")
		if s.password == "" {
			return s, fmt.Errorf("KAFKRON_SASL_PASSWORD_FILE %s is empty", path)
		}
	}
	return s, s.validate()
}

func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

func oneOf(value string, allowed []string) bool {
	for _, a := range allowed {
		if value == a {
			return true
		}
	}
	return false
}

func (s Security) validate() error {
	if !oneOf(s.Protocol, securityProtocols) {
		return fmt.Errorf("security protocol %q is not one of %s", s.Protocol, strings.Join(securityProtocols, ", "))
	}
	if !s.usesSASL() {
		return nil
	}
	if !oneOf(s.Mechanism, securityMechanisms) {
		return fmt.Errorf("SASL mechanism %q is not one of %s", s.Mechanism, strings.Join(securityMechanisms, ", "))
	}
	if s.Username == "" {
		return fmt.Errorf("%s needs a user: set KAFKRON_SASL_USERNAME (or username in the client config's sasl.jaas.config)", s.Protocol)
	}
	if s.password == "" {
		return fmt.Errorf("%s needs the password of user %s: set KAFKRON_SASL_PASSWORD_FILE to a file holding it (never the password itself)",
			s.Protocol, s.Username)
	}
	return nil
}

// Opts are the franz-go options of these settings (none for PLAINTEXT).
func (s Security) Opts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if s.usesTLS() {
		// Certificates are checked against the CA file (else the system's roots) and
		// the broker's name: franz-go sets ServerName to the host of each broker dialed.
		config := &tls.Config{MinVersion: tls.VersionTLS12}
		if s.CAFile != "" {
			pem, err := os.ReadFile(expandHome(s.CAFile))
			if err != nil {
				return nil, fmt.Errorf("KAFKRON_SSL_CAFILE %s: cannot read it (%v)", s.CAFile, unwrapPath(err))
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("KAFKRON_SSL_CAFILE %s: no PEM certificate in it", s.CAFile)
			}
			config.RootCAs = pool
		}
		opts = append(opts, kgo.DialTLSConfig(config))
	}
	if s.usesSASL() {
		var mechanism sasl.Mechanism
		switch s.Mechanism {
		case "PLAIN":
			mechanism = plain.Auth{User: s.Username, Pass: s.password}.AsMechanism()
		case "SCRAM-SHA-256":
			mechanism = scram.Auth{User: s.Username, Pass: s.password}.AsSha256Mechanism()
		case "SCRAM-SHA-512":
			mechanism = scram.Auth{User: s.Username, Pass: s.password}.AsSha512Mechanism()
		}
		opts = append(opts, kgo.SASL(mechanism))
	}
	return opts, nil
}
