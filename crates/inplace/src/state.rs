//! What the engine's lock guards: the page pool, the header, every table's details, the
//! sequence of batches and the kept versions; and the operations on them a batch is made of.

use crate::btree::Tree;
use crate::loc::{class_size, size_class, DiskLoc, RECORD_HEADER};
use crate::pool::Pool;
use crate::space::{self, Details, Header, CATALOG_DETAILS, DETAILS_LEN};
use crate::versions::History;
use engine::{Error, Result, TableConfig, TableId, WriteOp};
use std::collections::HashMap;

/// The catalog: a table of its own (id 0) mapping each table's name to a record holding its
/// details (updated in place) and its configuration.
pub const CATALOG: TableId = 0;

pub struct Table {
    pub name: String,
    pub cfg: TableConfig,
    pub details: Details,
    /// Where its details live: in the catalog record, or the header for the catalog itself.
    pub details_loc: DiskLoc,
    pub details_dirty: bool,
}

#[derive(Default, Clone, Copy)]
pub struct Counters {
    pub in_place: u64,
    pub moves: u64,
    pub inserts: u64,
    pub deletes: u64,
    /// Bytes of the records allocated since the engine opened (by inserts and moves), and of
    /// the values they were allocated for: their ratio is the power-of-two padding.
    pub record_bytes_allocated: u64,
    pub value_bytes_allocated: u64,
}

pub struct State {
    pub pool: Pool,
    pub header: Header,
    stored_header: Header,
    pub tables: HashMap<TableId, Table>,
    pub seq: u64,
    pub history: History,
    pub counters: Counters,
}

impl State {
    /// A new database: the header and the catalog's empty tree; `history` keeps versions.
    pub fn format(mut pool: Pool, history: History) -> Result<State> {
        let mut header = space::format(&mut pool)?;
        let mut details = Details::new(CATALOG);
        Tree {
            pool: &mut pool,
            header: &mut header,
            details: &mut details,
        }
        .create()?;
        let mut st = State::with(pool, header.clone(), details, history);
        st.stored_header = Header {
            file_count: 0,
            ..header
        };
        st.finish_batch()?;
        Ok(st)
    }

    /// An existing database: the header, the catalog and every table's details; `history`
    /// keeps versions.
    pub fn load(mut pool: Pool, history: History) -> Result<State> {
        let header = Header::decode(&pool.read(DiskLoc::new(0, 0), 32)?)?;
        let details = Details::decode(&pool.read(CATALOG_DETAILS, DETAILS_LEN)?);
        let mut st = State::with(pool, header, details, history);
        let mut entries = Vec::new();
        st.tree(CATALOG)?.range(
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            false,
            usize::MAX,
            &mut entries,
        )?;
        for (name, loc) in entries {
            let value = space::read_record(&mut st.pool, loc)?;
            let details = Details::decode(&value[..DETAILS_LEN]);
            let cfg: TableConfig =
                serde_json::from_slice(&value[DETAILS_LEN..]).map_err(|e| Error::Corrupt {
                    file: "mmapv1.0".into(),
                    offset: u64::from(loc.offset),
                    what: format!("a table's configuration: {e}"),
                })?;
            let table = Table {
                name: String::from_utf8_lossy(&name).into_owned(),
                cfg,
                details_loc: loc.plus(RECORD_HEADER),
                details,
                details_dirty: false,
            };
            st.tables.insert(table.details.id, table);
        }
        Ok(st)
    }

    fn with(pool: Pool, header: Header, catalog: Details, history: History) -> State {
        let mut tables = HashMap::new();
        tables.insert(
            CATALOG,
            Table {
                name: String::new(),
                cfg: TableConfig::collection(),
                details: catalog,
                details_loc: CATALOG_DETAILS,
                details_dirty: true,
            },
        );
        State {
            pool,
            stored_header: header.clone(),
            header,
            tables,
            seq: 0,
            history,
            counters: Counters::default(),
        }
    }

    /// The tree of a table.
    pub fn tree(&mut self, table: TableId) -> Result<Tree<'_>> {
        let t = self
            .tables
            .get_mut(&table)
            .ok_or_else(|| Error::NoSuchTable(format!("id {table}")))?;
        t.details_dirty = true;
        Ok(Tree {
            pool: &mut self.pool,
            header: &mut self.header,
            details: &mut t.details,
        })
    }

    /// A user table's id by name.
    pub fn table_named(&self, name: &str) -> Option<TableId> {
        self.tables
            .iter()
            .find(|(&id, t)| id != CATALOG && t.name == name)
            .map(|(&id, _)| id)
    }

    /// The key's newest value.
    pub fn get(&mut self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match self.find(table, key)? {
            Some(loc) => Ok(Some(space::read_record(&mut self.pool, loc)?)),
            None => Ok(None),
        }
    }

    fn find(&mut self, table: TableId, key: &[u8]) -> Result<Option<DiskLoc>> {
        let t = self
            .tables
            .get_mut(&table)
            .ok_or_else(|| Error::NoSuchTable(format!("id {table}")))?;
        Tree {
            pool: &mut self.pool,
            header: &mut self.header,
            details: &mut t.details,
        }
        .find(key)
    }

    /// Applies one operation of batch `seq`; with `keep`, the value it replaces is kept for
    /// the live snapshots.
    pub fn apply(&mut self, op: &WriteOp, seq: u64, keep: bool) -> Result<()> {
        let old = self.find(op.table, &op.key)?;
        if keep {
            let before = match old {
                Some(loc) => Some(space::read_record(&mut self.pool, loc)?),
                None => None,
            };
            self.history.keep(op.table, &op.key, seq, before);
        }
        match (&op.value, old) {
            (Some(v), Some(loc)) => self.update(op.table, &op.key, loc, v),
            (Some(v), None) => self.insert(op.table, &op.key, v),
            (None, Some(loc)) => self.remove(op.table, &op.key, loc),
            (None, None) => Ok(()),
        }
    }

    fn new_record(&mut self, table: TableId, value: &[u8]) -> Result<DiskLoc> {
        let class = size_class(value.len()).expect("value sizes are checked before a batch");
        let tree = self.tree(table)?;
        let loc = space::alloc_record(tree.pool, tree.header, tree.details, class)?;
        space::write_record(&mut self.pool, loc, value)?;
        self.counters.record_bytes_allocated += u64::from(class_size(class));
        self.counters.value_bytes_allocated += value.len() as u64;
        Ok(loc)
    }

    fn insert(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<()> {
        let loc = self.new_record(table, value)?;
        let mut tree = self.tree(table)?;
        let replaced = tree.upsert(key, loc)?;
        assert!(replaced.is_none(), "an insert of a key the tree holds");
        tree.details.entries += 1;
        self.counters.inserts += 1;
        Ok(())
    }

    /// An update rewrites the record in place when the value fits its padded size, else moves
    /// it to a new record and frees the old one to its size class's list.
    fn update(&mut self, table: TableId, key: &[u8], loc: DiskLoc, value: &[u8]) -> Result<()> {
        let size = space::record_size(&mut self.pool, loc)?;
        if value.len() as u64 + u64::from(RECORD_HEADER) <= u64::from(size) {
            self.counters.in_place += 1;
            return space::write_record(&mut self.pool, loc, value);
        }
        let new = self.new_record(table, value)?;
        let mut tree = self.tree(table)?;
        let was = tree.upsert(key, new)?;
        assert_eq!(was, Some(loc), "a moved record's key pointed elsewhere");
        space::free_record(tree.pool, tree.details, loc)?;
        self.counters.moves += 1;
        Ok(())
    }

    fn remove(&mut self, table: TableId, key: &[u8], loc: DiskLoc) -> Result<()> {
        let mut tree = self.tree(table)?;
        let was = tree.remove(key)?;
        assert_eq!(was, Some(loc), "a removed key pointed elsewhere");
        space::free_record(tree.pool, tree.details, loc)?;
        tree.details.entries -= 1;
        self.counters.deletes += 1;
        Ok(())
    }

    /// Creates a table: its empty tree, and its catalog record.
    pub fn create_table(&mut self, name: &str, cfg: &TableConfig, seq: u64) -> Result<TableId> {
        let id = self.header.next_table_id;
        self.header.next_table_id += 1;
        let mut details = Details::new(id);
        Tree {
            pool: &mut self.pool,
            header: &mut self.header,
            details: &mut details,
        }
        .create()?;
        let mut value = details.encode();
        value.extend_from_slice(&serde_json::to_vec(cfg).expect("a table config serializes"));
        let op = WriteOp {
            table: CATALOG,
            key: name.as_bytes().to_vec(),
            value: Some(value),
        };
        self.apply(&op, seq, false)?;
        let loc = self.find(CATALOG, name.as_bytes())?.expect("just inserted");
        self.tables.insert(
            id,
            Table {
                name: name.to_string(),
                cfg: cfg.clone(),
                details,
                details_loc: loc.plus(RECORD_HEADER),
                details_dirty: false,
            },
        );
        Ok(id)
    }

    /// Drops a table: its catalog record goes, its extents go to the free extent list.
    pub fn drop_table(&mut self, id: TableId, seq: u64) -> Result<()> {
        let t = self.tables.remove(&id).expect("the caller found it");
        space::release_extents(&mut self.pool, &mut self.header, &t.details)?;
        let op = WriteOp {
            table: CATALOG,
            key: t.name.into_bytes(),
            value: None,
        };
        self.apply(&op, seq, false)?;
        self.history.drop_table(id);
        Ok(())
    }

    /// Writes the changed details and header in place (the end of every batch).
    pub fn finish_batch(&mut self) -> Result<()> {
        for t in self.tables.values_mut() {
            if t.details_dirty {
                self.pool.write(t.details_loc, &t.details.encode())?;
                t.details_dirty = false;
            }
        }
        if self.header != self.stored_header {
            self.header.store(&mut self.pool)?;
            self.stored_header = self.header.clone();
        }
        Ok(())
    }
}
