//! The topology of a Redis Cluster as tern reads it: its masters, the slot
//! of a key, and which master serves which slots (`CLUSTER NODES`).

/// The number of hash slots of a Redis Cluster.
pub(crate) const SLOTS: u16 = 16384;

/// A master of a cluster: where per-node commands (SCAN) go.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Node {
    pub(crate) host: String,
    pub(crate) port: u16,
}

impl Node {
    /// The master a line of `CLUSTER NODES` names, with the line's fields
    /// (the ninth on are its slots); `None` for a replica, a failed master or
    /// a line it cannot read.
    pub(crate) fn master_in(line: &str) -> Option<(Node, Vec<&str>)> {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let flags = fields.get(2)?;
        if !flags.split(',').any(|f| f == "master") || flags.contains("fail") {
            return None;
        }
        // `host:port@cport[,hostname]`
        let addr = fields.get(1)?.split(['@', ',']).next()?;
        let (host, port) = addr.rsplit_once(':')?;
        let node = Node {
            host: host.to_owned(),
            port: port.parse().ok()?,
        };
        Some((node, fields))
    }
}

/// The cluster slot of a key: CRC16 (XMODEM) of its hash tag or of the whole key.
pub(crate) fn key_slot(key: &[u8]) -> u16 {
    let hashed = key
        .iter()
        .position(|b| *b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|b| *b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    let mut crc: u16 = 0;
    for b in hashed {
        crc ^= u16::from(*b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % SLOTS
}

/// A master and its slot ranges, from `CLUSTER NODES`.
pub(crate) type SlotMap = Vec<(Node, Vec<(u16, u16)>)>;

/// The masters of `CLUSTER NODES` text with the slots each serves, in address order.
pub(crate) fn parse_slot_map(text: &str) -> SlotMap {
    let mut map: SlotMap = text
        .lines()
        .filter_map(|line| {
            let (node, fields) = Node::master_in(line)?;
            let slots = fields
                .iter()
                .skip(8)
                .filter(|f| !f.starts_with('['))
                .filter_map(|f| match f.split_once('-') {
                    Some((lo, hi)) => Some((lo.parse().ok()?, hi.parse().ok()?)),
                    None => f.parse().ok().map(|s| (s, s)),
                })
                .collect();
            Some((node, slots))
        })
        .collect();
    map.sort();
    map
}
