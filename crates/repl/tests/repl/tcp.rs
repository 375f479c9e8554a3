//! A set whose members talk over TCP, authenticated with the cluster key.

use crate::common::{config, Recorder, WAIT};
use engine::MemEngine;
use repl::{Member, ReplNode, Role, TcpServer, TcpTransport};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn three_members_over_tcp_elect_and_replicate() {
    let key = b"a shared key file's bytes";
    let mut nodes = Vec::new();
    let mut servers = Vec::new();
    let mut appliers = Vec::new();
    for id in 1..=3u64 {
        let applier = Arc::new(Recorder::default());
        let node = ReplNode::start(
            &config(id),
            Arc::new(MemEngine::new()),
            applier.clone(),
            Arc::new(TcpTransport::new(key)),
        )
        .unwrap();
        let handler = node.handler();
        let server = node
            .runtime()
            .block_on(TcpServer::bind("127.0.0.1:0", Arc::from(&key[..]), handler))
            .unwrap();
        servers.push(server);
        nodes.push(node);
        appliers.push(applier);
    }
    let members: Vec<Member> = servers
        .iter()
        .enumerate()
        .map(|(i, s)| Member::voter(i as u64 + 1, s.local_addr().to_string()))
        .collect();
    nodes[0].run(nodes[0].initialize(&members)).unwrap();
    let start = Instant::now();
    let pos = loop {
        assert!(start.elapsed() < WAIT, "nothing committed over TCP");
        if let Some(l) = nodes.iter().find(|n| n.status().role == Role::Primary) {
            if let Ok(p) = l.run(l.propose(b"over tcp".to_vec())) {
                break p;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    while appliers
        .iter()
        .any(|a| a.entries().last().map(|e| e.0) != Some(pos))
    {
        assert!(start.elapsed() < WAIT, "not applied everywhere");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(appliers[2].entries(), vec![(pos, b"over tcp".to_vec())]);
}
