package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-db/sluice/sandbox"
)

// newSandboxKafkaCmd is `sluice sandbox kafka up|down`: a single Apache
// Kafka broker in KRaft mode for demos, tests and benchmarks. dir is the
// sandbox command's --dir.
func newSandboxKafkaCmd(dir *string) *cobra.Command {
	cmd := &cobra.Command{
		Use: "kafka",
		Example: `  sluice sandbox kafka up --name kafka --port 9092
  sluice sandbox kafka down --name kafka --purge`,
		Short: "Start and stop a local Apache Kafka " + sandbox.KafkaVersion + " broker (KRaft mode, loopback only)",
		Long: `A single Apache Kafka ` + sandbox.KafkaVersion + ` broker in KRaft mode (broker and controller in one
JVM) on 127.0.0.1, in DIR/NAME. Its jars come from Maven Central (fetched once
with mvn into ~/.cache/sluice-kafka/` + sandbox.KafkaVersion + `, or $SLUICE_KAFKA_CACHE) and run on
the installed Java. The internal topics have one replica, so transactions
work on this one broker.`,
	}
	up := sandbox.DefaultKafkaConfig()
	upCmd := &cobra.Command{
		Use: "up",
		Example: `  sluice sandbox kafka up --name kafka --port 9092
  sluice sandbox kafka up --name k2 --port 9093 --auto-create-topics=false
  sluice sandbox kafka up --name ks --port 9094 --sasl`,
		Short: "Create (first time) and start the broker; prints its address when it serves clients",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			up.Dir = *dir
			k, err := sandbox.KafkaUp(c.Context(), up)
			if err != nil {
				return err
			}
			fmt.Fprintln(c.OutOrStdout(), k.Addr())
			if k.TLSPort != 0 {
				fmt.Fprintf(c.OutOrStdout(), "TLS on %s, CA %s\n", k.TLSAddr(), k.CAFile())
			}
			if k.SASL {
				fmt.Fprintf(c.OutOrStdout(), "SASL users %s (super user) and %s: passwords in %s (mode 0600)\n",
					sandbox.KafkaAdminUser, sandbox.KafkaSluiceUser, filepath.Join(k.Home, "sasl.json"))
			}
			return nil
		},
	}
	f := upCmd.Flags()
	f.StringVar(&up.Name, "name", up.Name, "instance name")
	f.IntVar(&up.Port, "port", up.Port, "client port on 127.0.0.1")
	f.IntVar(&up.ControllerPort, "controller-port", 0, "KRaft controller port on 127.0.0.1 (default: a free port, kept across restarts)")
	f.StringVar(&up.Heap, "heap", up.Heap, "JVM heap (-Xmx)")
	f.BoolVar(&up.AutoCreateTopics, "auto-create-topics", up.AutoCreateTopics, "auto.create.topics.enable")
	f.StringArrayVar(&up.Options, "option", nil, "extra server.properties line, key=value (repeatable)")
	f.BoolVar(&up.SASL, "sasl", false, "clients authenticate with SASL (PLAIN, SCRAM-SHA-256/512; users admin and sluice) and ACLs apply (StandardAuthorizer); chosen at creation")
	f.IntVar(&up.TLSPort, "tls-port", 0, "also listen with TLS (SSL, or SASL_SSL with --sasl) on 127.0.0.1:PORT, with a certificate signed by the instance's CA (NAME/tls/ca.pem); chosen at creation")
	f.DurationVar(&up.StartTimeout, "timeout", up.StartTimeout, "how long to wait for the broker to serve clients")

	var name string
	var purge bool
	var timeout time.Duration
	downCmd := &cobra.Command{
		Use: "down",
		Example: `  sluice sandbox kafka down --name kafka
  sluice sandbox kafka down --name kafka --purge   # also remove its data`,
		Short: "Stop the broker by its own pid; --purge also removes its directory",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return sandbox.KafkaDown(c.Context(), *dir, name, purge, timeout)
		},
	}
	downCmd.Flags().StringVar(&name, "name", "kafka", "instance name")
	downCmd.Flags().BoolVar(&purge, "purge", false, "remove the broker's data and config too")
	downCmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "wait this long for a controlled shutdown before SIGKILL")
	cmd.AddCommand(upCmd, downCmd)
	return cmd
}
