-- The Mossgrove Community Seed Library: the state of the seed_library domain.
-- state.db is built from this file (sqlite3 state.db < state.sql); a test checks they agree.
PRAGMA foreign_keys = ON;

CREATE TABLE members (
  member_no   TEXT PRIMARY KEY,          -- M-0001
  name        TEXT NOT NULL,
  email       TEXT NOT NULL UNIQUE,
  tier        TEXT NOT NULL CHECK (tier IN ('standard', 'family', 'grower')),
  status      TEXT NOT NULL CHECK (status IN ('active', 'hold')),
  hold_reason TEXT,
  trained     INTEGER NOT NULL DEFAULT 0, -- completed the seed-saving course
  trained_on  TEXT,
  joined      TEXT NOT NULL
);

CREATE TABLE varieties (
  sku              TEXT PRIMARY KEY,     -- TOM-BRANDYWINE
  common_name      TEXT NOT NULL,
  latin_name       TEXT NOT NULL,
  category         TEXT NOT NULL,
  pollination      TEXT NOT NULL CHECK (pollination IN ('self', 'insect', 'wind')),
  rare             INTEGER NOT NULL DEFAULT 0,
  days_to_maturity INTEGER NOT NULL
);

CREATE TABLE lots (
  lot_code          TEXT PRIMARY KEY,    -- LOT-2024-031
  sku               TEXT NOT NULL REFERENCES varieties (sku),
  harvest_year      INTEGER NOT NULL,
  source            TEXT NOT NULL CHECK (source IN ('donation', 'purchase', 'grow-out')),
  donor_member_no   TEXT REFERENCES members (member_no),
  packets_available INTEGER NOT NULL CHECK (packets_available >= 0),
  status            TEXT NOT NULL CHECK (status IN ('available', 'untested', 'quarantined')),
  germination_pct   REAL
);

CREATE TABLE loans (
  loan_code     TEXT PRIMARY KEY,        -- LN-0001
  member_no     TEXT NOT NULL REFERENCES members (member_no),
  lot_code      TEXT NOT NULL REFERENCES lots (lot_code),
  packets       INTEGER NOT NULL CHECK (packets > 0),
  checkout_date TEXT NOT NULL,
  due_date      TEXT NOT NULL,
  extended      INTEGER NOT NULL DEFAULT 0,
  returned_date TEXT,
  outcome       TEXT CHECK (outcome IN ('grew-and-saved', 'grew-no-seed', 'failed'))
);

CREATE TABLE germination_tests (
  test_code      TEXT PRIMARY KEY,       -- GT-0001
  lot_code       TEXT NOT NULL REFERENCES lots (lot_code),
  test_date      TEXT NOT NULL,
  seeds_sown     INTEGER NOT NULL CHECK (seeds_sown > 0),
  seeds_sprouted INTEGER NOT NULL CHECK (seeds_sprouted >= 0),
  pct            REAL NOT NULL
);


INSERT INTO members VALUES ('M-0001', 'Kwame Eriksen', 'kwame.eriksen@allotment.example', 'standard', 'hold', 'loan overdue', 1, '2024-08-30', '2019-07-12');
INSERT INTO members VALUES ('M-0002', 'Lena Sato', 'lena.sato@posteo.example', 'grower', 'hold', 'loan overdue', 1, '2023-05-28', '2021-06-07');
INSERT INTO members VALUES ('M-0003', 'Nia Chowdhury', 'nia.chowdhury@fastmail.example', 'standard', 'hold', 'loan overdue', 0, NULL, '2019-05-02');
INSERT INTO members VALUES ('M-0004', 'Soren Delacroix', 'soren.delacroix@fastmail.example', 'grower', 'active', NULL, 0, NULL, '2022-03-27');
INSERT INTO members VALUES ('M-0005', 'Soren Mbeki', 'soren.mbeki@posteo.example', 'standard', 'active', NULL, 1, '2023-07-15', '2020-08-16');
INSERT INTO members VALUES ('M-0006', 'Nia Eriksen', 'nia.eriksen@posteo.example', 'grower', 'hold', 'returned email: contact details to confirm', 1, '2023-09-02', '2019-07-31');
INSERT INTO members VALUES ('M-0007', 'Soren Sato', 'soren.sato@fastmail.example', 'family', 'hold', 'loan overdue', 1, '2023-05-04', '2022-03-01');
INSERT INTO members VALUES ('M-0008', 'Bilal Thorne', 'bilal.thorne@fastmail.example', 'family', 'active', NULL, 0, NULL, '2021-05-25');
INSERT INTO members VALUES ('M-0009', 'Yusra Kaur', 'yusra.kaur@allotment.example', 'grower', 'active', NULL, 0, NULL, '2021-01-10');
INSERT INTO members VALUES ('M-0010', 'Jolene Hughes', 'jolene.hughes@fastmail.example', 'standard', 'active', NULL, 1, '2024-01-02', '2021-12-11');
INSERT INTO members VALUES ('M-0011', 'Priya Kaur', 'priya.kaur@allotment.example', 'standard', 'active', NULL, 0, NULL, '2019-05-30');
INSERT INTO members VALUES ('M-0012', 'Dmitri Quiroga', 'dmitri.quiroga@allotment.example', 'standard', 'active', NULL, 0, NULL, '2019-11-08');
INSERT INTO members VALUES ('M-0013', 'Priya Novak', 'priya.novak@posteo.example', 'standard', 'active', NULL, 0, NULL, '2022-03-19');
INSERT INTO members VALUES ('M-0014', 'Zofia Kaur', 'zofia.kaur@mossgrove.example', 'family', 'active', NULL, 0, NULL, '2022-04-02');
INSERT INTO members VALUES ('M-0015', 'Zofia O''Rourke', 'zofia.orourke@posteo.example', 'standard', 'active', NULL, 0, NULL, '2021-08-28');
INSERT INTO members VALUES ('M-0016', 'Wen Chowdhury', 'wen.chowdhury@posteo.example', 'standard', 'active', NULL, 0, NULL, '2022-10-27');
INSERT INTO members VALUES ('M-0017', 'Oskar Jovanovic', 'oskar.jovanovic@allotment.example', 'family', 'active', NULL, 1, '2024-06-15', '2020-12-28');
INSERT INTO members VALUES ('M-0018', 'Farah Thorne', 'farah.thorne@posteo.example', 'family', 'active', NULL, 1, '2023-12-20', '2019-09-22');
INSERT INTO members VALUES ('M-0019', 'Xander Hughes', 'xander.hughes@allotment.example', 'family', 'active', NULL, 0, NULL, '2021-10-13');
INSERT INTO members VALUES ('M-0020', 'Carys Fairweather', 'carys.fairweather@allotment.example', 'family', 'active', NULL, 0, NULL, '2023-12-15');
INSERT INTO members VALUES ('M-0021', 'Esi Novak', 'esi.novak@mossgrove.example', 'family', 'active', NULL, 0, NULL, '2022-10-30');
INSERT INTO members VALUES ('M-0022', 'Mateo Hughes', 'mateo.hughes@fastmail.example', 'standard', 'active', NULL, 1, '2023-10-24', '2022-09-10');
INSERT INTO members VALUES ('M-0023', 'Hana Abernethy', 'hana.abernethy@allotment.example', 'grower', 'active', NULL, 1, '2023-12-14', '2019-01-09');
INSERT INTO members VALUES ('M-0024', 'Rosa Lindgren', 'rosa.lindgren@mossgrove.example', 'standard', 'active', NULL, 0, NULL, '2021-11-21');
INSERT INTO members VALUES ('M-0025', 'Tamsin Baptiste', 'tamsin.baptiste@allotment.example', 'grower', 'active', NULL, 0, NULL, '2021-03-28');
INSERT INTO members VALUES ('M-0026', 'Mateo Delacroix', 'mateo.delacroix@allotment.example', 'family', 'active', NULL, 1, '2023-05-08', '2020-03-03');
INSERT INTO members VALUES ('M-0027', 'Oskar Fairweather', 'oskar.fairweather@posteo.example', 'family', 'active', NULL, 0, NULL, '2019-07-29');
INSERT INTO members VALUES ('M-0028', 'Agnes Sato', 'agnes.sato@fastmail.example', 'grower', 'active', NULL, 1, '2024-03-07', '2022-06-10');
INSERT INTO members VALUES ('M-0029', 'Agnes Chowdhury', 'agnes.chowdhury@fastmail.example', 'grower', 'active', NULL, 0, NULL, '2022-07-23');
INSERT INTO members VALUES ('M-0030', 'Ivo Lindgren', 'ivo.lindgren@mossgrove.example', 'family', 'active', NULL, 1, '2024-07-12', '2021-08-12');
INSERT INTO members VALUES ('M-0031', 'Priya Petrov', 'priya.petrov@mossgrove.example', 'standard', 'active', NULL, 1, '2024-02-14', '2023-02-25');
INSERT INTO members VALUES ('M-0032', 'Ivo Petrov', 'ivo.petrov@fastmail.example', 'grower', 'active', NULL, 1, '2024-08-22', '2021-01-10');
INSERT INTO members VALUES ('M-0033', 'Esi Rahman', 'esi.rahman@posteo.example', 'grower', 'active', NULL, 1, '2023-06-02', '2022-11-26');
INSERT INTO members VALUES ('M-0034', 'Ivo Quiroga', 'ivo.quiroga@mossgrove.example', 'standard', 'active', NULL, 0, NULL, '2020-04-01');
INSERT INTO members VALUES ('M-0035', 'Rosa Rahman', 'rosa.rahman@mossgrove.example', 'standard', 'active', NULL, 0, NULL, '2023-06-03');
INSERT INTO members VALUES ('M-0036', 'Yusra Gallo', 'yusra.gallo@fastmail.example', 'family', 'active', NULL, 0, NULL, '2020-04-09');
INSERT INTO members VALUES ('M-0037', 'Gwil Quiroga', 'gwil.quiroga@allotment.example', 'family', 'active', NULL, 0, NULL, '2019-02-27');
INSERT INTO members VALUES ('M-0038', 'Zofia Ibarra', 'zofia.ibarra@allotment.example', 'standard', 'active', NULL, 1, '2024-02-16', '2021-07-04');
INSERT INTO members VALUES ('M-0039', 'Zofia Lindgren', 'zofia.lindgren@mossgrove.example', 'standard', 'active', NULL, 1, '2023-10-19', '2021-08-20');
INSERT INTO members VALUES ('M-0040', 'Gwil Kaur', 'gwil.kaur@fastmail.example', 'family', 'active', NULL, 0, NULL, '2024-01-18');
INSERT INTO members VALUES ('M-0041', 'Tamsin Abernethy', 'tamsin.abernethy@allotment.example', 'family', 'active', NULL, 0, NULL, '2019-06-23');
INSERT INTO members VALUES ('M-0042', 'Vera Delacroix', 'vera.delacroix@allotment.example', 'standard', 'active', NULL, 0, NULL, '2020-01-01');
INSERT INTO members VALUES ('M-0043', 'Nia Kaur', 'nia.kaur@posteo.example', 'family', 'active', NULL, 0, NULL, '2023-03-03');
INSERT INTO members VALUES ('M-0044', 'Farah Eriksen', 'farah.eriksen@posteo.example', 'standard', 'active', NULL, 0, NULL, '2021-08-11');
INSERT INTO members VALUES ('M-0045', 'Zofia Eriksen', 'zofia.eriksen@allotment.example', 'family', 'active', NULL, 1, '2024-09-12', '2019-09-26');
INSERT INTO members VALUES ('M-0046', 'Agnes Abernethy', 'agnes.abernethy@posteo.example', 'grower', 'active', NULL, 0, NULL, '2019-10-13');
INSERT INTO members VALUES ('M-0047', 'Nia Gallo', 'nia.gallo@fastmail.example', 'standard', 'active', NULL, 1, '2023-12-25', '2021-10-23');
INSERT INTO members VALUES ('M-0048', 'Hana Sato', 'hana.sato@mossgrove.example', 'standard', 'active', NULL, 0, NULL, '2023-09-05');
INSERT INTO members VALUES ('M-0049', 'Esi Baptiste', 'esi.baptiste@mossgrove.example', 'family', 'active', NULL, 0, NULL, '2023-07-28');
INSERT INTO members VALUES ('M-0050', 'Quinn Novak', 'quinn.novak@fastmail.example', 'grower', 'active', NULL, 1, '2024-08-04', '2019-02-08');
INSERT INTO members VALUES ('M-0051', 'Yusra Eriksen', 'yusra.eriksen@fastmail.example', 'standard', 'active', NULL, 0, NULL, '2023-01-25');
INSERT INTO members VALUES ('M-0052', 'Dmitri Rahman', 'dmitri.rahman@posteo.example', 'family', 'active', NULL, 0, NULL, '2021-12-22');
INSERT INTO members VALUES ('M-0053', 'Rosa Petrov', 'rosa.petrov@posteo.example', 'grower', 'active', NULL, 1, '2023-09-12', '2020-07-21');
INSERT INTO members VALUES ('M-0054', 'Bilal Delacroix', 'bilal.delacroix@allotment.example', 'grower', 'active', NULL, 1, '2023-05-04', '2021-06-26');
INSERT INTO members VALUES ('M-0055', 'Kwame Thorne', 'kwame.thorne@fastmail.example', 'standard', 'active', NULL, 0, NULL, '2021-12-28');
INSERT INTO members VALUES ('M-0056', 'Zofia Petrov', 'zofia.petrov@fastmail.example', 'grower', 'active', NULL, 0, NULL, '2024-04-13');
INSERT INTO members VALUES ('M-0057', 'Ivo Rahman', 'ivo.rahman@fastmail.example', 'family', 'active', NULL, 1, '2023-07-03', '2021-03-14');
INSERT INTO members VALUES ('M-0058', 'Oskar Kaur', 'oskar.kaur@posteo.example', 'standard', 'active', NULL, 0, NULL, '2020-03-11');
INSERT INTO members VALUES ('M-0059', 'Vera Jovanovic', 'vera.jovanovic@posteo.example', 'standard', 'active', NULL, 0, NULL, '2022-08-10');
INSERT INTO members VALUES ('M-0060', 'Vera Lindgren', 'vera.lindgren@fastmail.example', 'standard', 'active', NULL, 0, NULL, '2024-06-04');

INSERT INTO varieties VALUES ('TOM-BRANDYWINE', 'Brandywine tomato', 'Solanum lycopersicum', 'tomato', 'self', 0, 90);
INSERT INTO varieties VALUES ('TOM-GREEN-ZEBRA', 'Green Zebra tomato', 'Solanum lycopersicum', 'tomato', 'self', 0, 78);
INSERT INTO varieties VALUES ('TOM-BLACK-KRIM', 'Black Krim tomato', 'Solanum lycopersicum', 'tomato', 'self', 0, 80);
INSERT INTO varieties VALUES ('TOM-MOSSGROVE-PINK', 'Mossgrove Pink (local heirloom)', 'Solanum lycopersicum', 'tomato', 'self', 1, 85);
INSERT INTO varieties VALUES ('BEA-CHEROKEE-TRAIL', 'Cherokee Trail of Tears bean', 'Phaseolus vulgaris', 'bean', 'self', 0, 85);
INSERT INTO varieties VALUES ('BEA-JACOBS-CATTLE', 'Jacob''s Cattle bean', 'Phaseolus vulgaris', 'bean', 'self', 0, 90);
INSERT INTO varieties VALUES ('BEA-CRIMSON-FLOWERED', 'Crimson-flowered broad bean', 'Vicia faba', 'bean', 'insect', 1, 100);
INSERT INTO varieties VALUES ('BEA-MAGPIE', 'Magpie bean', 'Phaseolus vulgaris', 'bean', 'self', 0, 80);
INSERT INTO varieties VALUES ('PEA-CARLIN', 'Carlin pea', 'Pisum sativum', 'pea', 'self', 0, 70);
INSERT INTO varieties VALUES ('PEA-PRINCE-ALBERT', 'Prince Albert pea', 'Pisum sativum', 'pea', 'self', 1, 65);
INSERT INTO varieties VALUES ('PEA-GOLDEN-SWEET', 'Golden Sweet snow pea', 'Pisum sativum', 'pea', 'self', 0, 70);
INSERT INTO varieties VALUES ('SQU-UCHIKI-KURI', 'Uchiki Kuri squash', 'Cucurbita maxima', 'squash', 'insect', 0, 95);
INSERT INTO varieties VALUES ('SQU-TROMBONCINO', 'Tromboncino', 'Cucurbita moschata', 'squash', 'insect', 0, 80);
INSERT INTO varieties VALUES ('SQU-MARINA-DI-CHIOGGIA', 'Marina di Chioggia', 'Cucurbita maxima', 'squash', 'insect', 1, 110);
INSERT INTO varieties VALUES ('LET-DEER-TONGUE', 'Deer Tongue lettuce', 'Lactuca sativa', 'lettuce', 'self', 0, 50);
INSERT INTO varieties VALUES ('LET-FORELLENSCHLUSS', 'Forellenschluss lettuce', 'Lactuca sativa', 'lettuce', 'self', 0, 55);
INSERT INTO varieties VALUES ('LET-MERVEILLE', 'Merveille des Quatre Saisons', 'Lactuca sativa', 'lettuce', 'self', 0, 60);
INSERT INTO varieties VALUES ('KAL-RED-RUSSIAN', 'Red Russian kale', 'Brassica napus', 'kale', 'insect', 0, 55);
INSERT INTO varieties VALUES ('KAL-NERO-TOSCANA', 'Cavolo Nero', 'Brassica oleracea', 'kale', 'insect', 0, 65);
INSERT INTO varieties VALUES ('KAL-DAUBENTON', 'Daubenton perennial kale', 'Brassica oleracea', 'kale', 'insect', 1, 0);
INSERT INTO varieties VALUES ('COR-GLASS-GEM', 'Glass Gem corn', 'Zea mays', 'corn', 'wind', 0, 110);
INSERT INTO varieties VALUES ('COR-BLOODY-BUTCHER', 'Bloody Butcher corn', 'Zea mays', 'corn', 'wind', 1, 100);
INSERT INTO varieties VALUES ('PEP-JIMMY-NARDELLO', 'Jimmy Nardello pepper', 'Capsicum annuum', 'pepper', 'self', 0, 80);
INSERT INTO varieties VALUES ('PEP-FISH', 'Fish pepper', 'Capsicum annuum', 'pepper', 'self', 1, 80);
INSERT INTO varieties VALUES ('PEP-ESPELETTE', 'Piment d''Espelette', 'Capsicum annuum', 'pepper', 'self', 0, 100);
INSERT INTO varieties VALUES ('HER-BRONZE-FENNEL', 'Bronze fennel', 'Foeniculum vulgare', 'herb', 'insect', 0, 90);
INSERT INTO varieties VALUES ('HER-LEMON-BASIL', 'Lemon basil', 'Ocimum x citriodorum', 'herb', 'insect', 0, 60);
INSERT INTO varieties VALUES ('HER-SHISO', 'Red shiso', 'Perilla frutescens', 'herb', 'insect', 0, 70);
INSERT INTO varieties VALUES ('FLO-CALENDULA-RESINA', 'Calendula ''Resina''', 'Calendula officinalis', 'flower', 'insect', 0, 55);
INSERT INTO varieties VALUES ('FLO-CORNFLOWER', 'Cornflower', 'Centaurea cyanus', 'flower', 'insect', 0, 70);
INSERT INTO varieties VALUES ('FLO-PHACELIA', 'Phacelia', 'Phacelia tanacetifolia', 'flower', 'insect', 0, 45);
INSERT INTO varieties VALUES ('ROO-CHIOGGIA-BEET', 'Chioggia beetroot', 'Beta vulgaris', 'root', 'wind', 0, 60);
INSERT INTO varieties VALUES ('ROO-PURPLE-HAZE', 'Purple Haze carrot', 'Daucus carota', 'root', 'insect', 0, 70);
INSERT INTO varieties VALUES ('ROO-HAMBURG-PARSLEY', 'Hamburg parsley', 'Petroselinum crispum', 'root', 'insect', 1, 95);
INSERT INTO varieties VALUES ('CUC-LEMON', 'Lemon cucumber', 'Cucumis sativus', 'cucumber', 'insect', 0, 65);
INSERT INTO varieties VALUES ('CUC-CRYSTAL-APPLE', 'Crystal Apple cucumber', 'Cucumis sativus', 'cucumber', 'insect', 0, 60);
INSERT INTO varieties VALUES ('ONI-WELSH', 'Welsh onion', 'Allium fistulosum', 'allium', 'insect', 0, 70);
INSERT INTO varieties VALUES ('ONI-ROSSA-TROPEA', 'Rossa di Tropea onion', 'Allium cepa', 'allium', 'insect', 1, 120);

INSERT INTO lots VALUES ('LOT-2022-001', 'BEA-CHEROKEE-TRAIL', 2022, 'donation', 'M-0005', 10, 'available', 95.0);
INSERT INTO lots VALUES ('LOT-2022-002', 'BEA-CRIMSON-FLOWERED', 2022, 'donation', 'M-0017', 4, 'available', 76.0);
INSERT INTO lots VALUES ('LOT-2022-003', 'COR-BLOODY-BUTCHER', 2022, 'grow-out', 'M-0015', 9, 'quarantined', 62.0);
INSERT INTO lots VALUES ('LOT-2022-004', 'CUC-CRYSTAL-APPLE', 2022, 'grow-out', 'M-0015', 7, 'untested', NULL);
INSERT INTO lots VALUES ('LOT-2022-005', 'CUC-LEMON', 2022, 'grow-out', 'M-0030', 3, 'available', 95.0);
INSERT INTO lots VALUES ('LOT-2022-006', 'FLO-PHACELIA', 2022, 'grow-out', 'M-0058', 10, 'available', 82.0);
INSERT INTO lots VALUES ('LOT-2022-007', 'HER-LEMON-BASIL', 2022, 'donation', 'M-0033', 9, 'quarantined', 48.0);
INSERT INTO lots VALUES ('LOT-2022-008', 'HER-SHISO', 2022, 'donation', 'M-0022', 6, 'available', 80.0);
INSERT INTO lots VALUES ('LOT-2022-009', 'KAL-DAUBENTON', 2022, 'purchase', NULL, 3, 'available', 84.0);
INSERT INTO lots VALUES ('LOT-2022-010', 'KAL-NERO-TOSCANA', 2022, 'purchase', NULL, 1, 'available', 85.0);
INSERT INTO lots VALUES ('LOT-2022-011', 'LET-DEER-TONGUE', 2022, 'donation', 'M-0003', 1, 'available', 88.0);
INSERT INTO lots VALUES ('LOT-2022-012', 'LET-MERVEILLE', 2022, 'grow-out', 'M-0016', 10, 'available', 80.0);
INSERT INTO lots VALUES ('LOT-2022-013', 'PEP-FISH', 2022, 'grow-out', 'M-0007', 4, 'available', 95.0);
INSERT INTO lots VALUES ('LOT-2022-014', 'ROO-HAMBURG-PARSLEY', 2022, 'donation', 'M-0020', 3, 'available', 82.0);
INSERT INTO lots VALUES ('LOT-2022-015', 'SQU-UCHIKI-KURI', 2022, 'grow-out', 'M-0025', 12, 'available', 84.0);
INSERT INTO lots VALUES ('LOT-2022-016', 'TOM-BLACK-KRIM', 2022, 'donation', 'M-0017', 2, 'available', 72.0);
INSERT INTO lots VALUES ('LOT-2023-001', 'HER-BRONZE-FENNEL', 2023, 'donation', 'M-0031', 7, 'untested', NULL);
INSERT INTO lots VALUES ('LOT-2023-002', 'KAL-DAUBENTON', 2023, 'grow-out', 'M-0006', 9, 'quarantined', 30.0);
INSERT INTO lots VALUES ('LOT-2023-003', 'KAL-NERO-TOSCANA', 2023, 'purchase', NULL, 4, 'available', 90.0);
INSERT INTO lots VALUES ('LOT-2023-004', 'LET-DEER-TONGUE', 2023, 'grow-out', 'M-0047', 12, 'available', 72.0);
INSERT INTO lots VALUES ('LOT-2023-005', 'ONI-ROSSA-TROPEA', 2023, 'purchase', NULL, 3, 'available', 80.0);
INSERT INTO lots VALUES ('LOT-2023-006', 'PEA-GOLDEN-SWEET', 2023, 'donation', 'M-0006', 10, 'untested', NULL);
INSERT INTO lots VALUES ('LOT-2023-007', 'PEA-GOLDEN-SWEET', 2023, 'grow-out', 'M-0029', 6, 'available', 80.0);
INSERT INTO lots VALUES ('LOT-2023-008', 'PEA-PRINCE-ALBERT', 2023, 'donation', 'M-0022', 2, 'available', 95.0);
INSERT INTO lots VALUES ('LOT-2023-009', 'PEP-ESPELETTE', 2023, 'grow-out', 'M-0051', 2, 'untested', NULL);
INSERT INTO lots VALUES ('LOT-2023-010', 'PEP-FISH', 2023, 'donation', 'M-0018', 10, 'untested', NULL);
INSERT INTO lots VALUES ('LOT-2023-011', 'PEP-JIMMY-NARDELLO', 2023, 'donation', 'M-0058', 1, 'available', 80.0);
INSERT INTO lots VALUES ('LOT-2023-012', 'ROO-CHIOGGIA-BEET', 2023, 'donation', 'M-0034', 10, 'available', 96.0);
INSERT INTO lots VALUES ('LOT-2023-013', 'ROO-HAMBURG-PARSLEY', 2023, 'grow-out', 'M-0034', 3, 'untested', NULL);
INSERT INTO lots VALUES ('LOT-2023-014', 'SQU-TROMBONCINO', 2023, 'donation', 'M-0006', 2, 'available', 92.0);
INSERT INTO lots VALUES ('LOT-2023-015', 'SQU-UCHIKI-KURI', 2023, 'donation', 'M-0057', 2, 'available', 80.0);
INSERT INTO lots VALUES ('LOT-2023-016', 'TOM-BRANDYWINE', 2023, 'donation', 'M-0026', 5, 'quarantined', 35.0);
INSERT INTO lots VALUES ('LOT-2023-017', 'TOM-BRANDYWINE', 2023, 'purchase', NULL, 7, 'untested', NULL);
INSERT INTO lots VALUES ('LOT-2023-018', 'TOM-MOSSGROVE-PINK', 2023, 'purchase', NULL, 12, 'available', 85.0);
INSERT INTO lots VALUES ('LOT-2024-001', 'BEA-CHEROKEE-TRAIL', 2024, 'donation', 'M-0018', 4, 'available', 88.0);
INSERT INTO lots VALUES ('LOT-2024-002', 'BEA-CRIMSON-FLOWERED', 2024, 'donation', 'M-0019', 4, 'quarantined', 48.0);
INSERT INTO lots VALUES ('LOT-2024-003', 'BEA-JACOBS-CATTLE', 2024, 'purchase', NULL, 0, 'available', 88.0);
INSERT INTO lots VALUES ('LOT-2024-004', 'BEA-MAGPIE', 2024, 'donation', 'M-0017', 12, 'available', 72.0);
INSERT INTO lots VALUES ('LOT-2024-005', 'COR-BLOODY-BUTCHER', 2024, 'donation', 'M-0011', 10, 'available', 96.0);
INSERT INTO lots VALUES ('LOT-2024-006', 'CUC-CRYSTAL-APPLE', 2024, 'donation', 'M-0002', 8, 'available', 84.0);
INSERT INTO lots VALUES ('LOT-2024-007', 'FLO-CALENDULA-RESINA', 2024, 'purchase', NULL, 6, 'available', 82.0);
INSERT INTO lots VALUES ('LOT-2024-008', 'FLO-CORNFLOWER', 2024, 'grow-out', 'M-0037', 12, 'available', 75.0);
INSERT INTO lots VALUES ('LOT-2024-009', 'FLO-PHACELIA', 2024, 'grow-out', 'M-0055', 8, 'available', 76.0);
INSERT INTO lots VALUES ('LOT-2024-010', 'HER-BRONZE-FENNEL', 2024, 'grow-out', 'M-0017', 3, 'available', 84.0);
INSERT INTO lots VALUES ('LOT-2024-011', 'HER-LEMON-BASIL', 2024, 'purchase', NULL, 2, 'available', 76.0);
INSERT INTO lots VALUES ('LOT-2024-012', 'HER-SHISO', 2024, 'purchase', NULL, 3, 'available', 85.0);
INSERT INTO lots VALUES ('LOT-2024-013', 'KAL-DAUBENTON', 2024, 'purchase', NULL, 12, 'available', 98.0);
INSERT INTO lots VALUES ('LOT-2024-014', 'LET-DEER-TONGUE', 2024, 'donation', 'M-0059', 3, 'available', 92.0);
INSERT INTO lots VALUES ('LOT-2024-015', 'LET-FORELLENSCHLUSS', 2024, 'donation', 'M-0041', 3, 'available', 88.0);
INSERT INTO lots VALUES ('LOT-2024-016', 'LET-FORELLENSCHLUSS', 2024, 'grow-out', 'M-0001', 10, 'quarantined', 58.0);
INSERT INTO lots VALUES ('LOT-2024-017', 'LET-MERVEILLE', 2024, 'purchase', NULL, 4, 'available', 85.0);
INSERT INTO lots VALUES ('LOT-2024-018', 'ONI-WELSH', 2024, 'donation', 'M-0045', 6, 'available', 90.0);
INSERT INTO lots VALUES ('LOT-2024-019', 'ONI-WELSH', 2024, 'donation', 'M-0001', 12, 'available', 92.0);
INSERT INTO lots VALUES ('LOT-2024-020', 'PEA-CARLIN', 2024, 'purchase', NULL, 10, 'untested', NULL);
INSERT INTO lots VALUES ('LOT-2024-021', 'PEA-GOLDEN-SWEET', 2024, 'donation', 'M-0045', 2, 'available', 72.0);
INSERT INTO lots VALUES ('LOT-2024-022', 'PEA-PRINCE-ALBERT', 2024, 'grow-out', 'M-0004', 4, 'available', 70.0);
INSERT INTO lots VALUES ('LOT-2024-023', 'PEP-ESPELETTE', 2024, 'donation', 'M-0047', 8, 'available', 74.0);
INSERT INTO lots VALUES ('LOT-2024-024', 'PEP-FISH', 2024, 'donation', 'M-0024', 6, 'untested', NULL);
INSERT INTO lots VALUES ('LOT-2024-025', 'PEP-JIMMY-NARDELLO', 2024, 'donation', 'M-0027', 1, 'available', 80.0);
INSERT INTO lots VALUES ('LOT-2024-026', 'PEP-JIMMY-NARDELLO', 2024, 'donation', 'M-0021', 1, 'available', 94.0);
INSERT INTO lots VALUES ('LOT-2024-027', 'ROO-CHIOGGIA-BEET', 2024, 'purchase', NULL, 3, 'available', 90.0);
INSERT INTO lots VALUES ('LOT-2024-028', 'SQU-TROMBONCINO', 2024, 'donation', 'M-0026', 3, 'available', 80.0);
INSERT INTO lots VALUES ('LOT-2024-029', 'TOM-BRANDYWINE', 2024, 'donation', 'M-0023', 6, 'available', 74.0);
INSERT INTO lots VALUES ('LOT-2024-030', 'TOM-GREEN-ZEBRA', 2024, 'purchase', NULL, 8, 'quarantined', 56.0);
INSERT INTO lots VALUES ('LOT-2025-001', 'BEA-MAGPIE', 2025, 'donation', 'M-0033', 9, 'quarantined', 38.0);
INSERT INTO lots VALUES ('LOT-2025-002', 'COR-GLASS-GEM', 2025, 'donation', 'M-0010', 2, 'available', 96.0);
INSERT INTO lots VALUES ('LOT-2025-003', 'CUC-CRYSTAL-APPLE', 2025, 'donation', 'M-0036', 8, 'available', 75.0);
INSERT INTO lots VALUES ('LOT-2025-004', 'FLO-CALENDULA-RESINA', 2025, 'donation', 'M-0057', 8, 'available', 90.0);
INSERT INTO lots VALUES ('LOT-2025-005', 'HER-BRONZE-FENNEL', 2025, 'donation', 'M-0042', 12, 'available', 85.0);
INSERT INTO lots VALUES ('LOT-2025-006', 'KAL-RED-RUSSIAN', 2025, 'donation', 'M-0005', 4, 'available', 80.0);
INSERT INTO lots VALUES ('LOT-2025-007', 'LET-FORELLENSCHLUSS', 2025, 'donation', 'M-0043', 10, 'available', 92.0);
INSERT INTO lots VALUES ('LOT-2025-008', 'ROO-CHIOGGIA-BEET', 2025, 'purchase', NULL, 12, 'available', 74.0);
INSERT INTO lots VALUES ('LOT-2025-009', 'ROO-PURPLE-HAZE', 2025, 'donation', 'M-0001', 0, 'available', 78.0);
INSERT INTO lots VALUES ('LOT-2025-010', 'SQU-MARINA-DI-CHIOGGIA', 2025, 'donation', 'M-0043', 7, 'untested', NULL);
INSERT INTO lots VALUES ('LOT-2025-011', 'TOM-BLACK-KRIM', 2025, 'grow-out', 'M-0033', 3, 'available', 75.0);
INSERT INTO lots VALUES ('LOT-2025-012', 'TOM-MOSSGROVE-PINK', 2025, 'purchase', NULL, 0, 'available', 76.0);

INSERT INTO loans VALUES ('LN-0001', 'M-0011', 'LOT-2025-012', 2, '2025-01-10', '2025-05-10', 0, '2025-05-18', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0002', 'M-0029', 'LOT-2022-015', 1, '2025-01-21', '2025-05-21', 0, '2025-05-23', 'failed');
INSERT INTO loans VALUES ('LN-0003', 'M-0001', 'LOT-2025-008', 1, '2025-01-23', '2025-05-23', 0, '2025-04-22', 'grew-no-seed');
INSERT INTO loans VALUES ('LN-0004', 'M-0045', 'LOT-2022-002', 3, '2025-01-25', '2025-05-25', 0, '2025-03-31', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0005', 'M-0055', 'LOT-2023-011', 1, '2025-01-25', '2025-05-25', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0006', 'M-0001', 'LOT-2024-029', 2, '2025-01-27', '2025-05-27', 0, '2025-05-04', 'failed');
INSERT INTO loans VALUES ('LN-0007', 'M-0054', 'LOT-2025-002', 2, '2025-01-29', '2025-05-29', 0, '2025-05-10', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0008', 'M-0033', 'LOT-2024-023', 3, '2025-01-30', '2025-05-30', 0, '2025-04-16', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0009', 'M-0059', 'LOT-2024-001', 1, '2025-01-30', '2025-05-30', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0010', 'M-0037', 'LOT-2023-003', 2, '2025-01-31', '2025-05-31', 0, '2025-06-06', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0011', 'M-0033', 'LOT-2024-001', 1, '2025-02-03', '2025-06-03', 0, '2025-05-03', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0012', 'M-0009', 'LOT-2022-001', 2, '2025-02-05', '2025-06-05', 0, '2025-05-26', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0013', 'M-0040', 'LOT-2023-012', 1, '2025-02-18', '2025-06-18', 0, '2025-06-21', 'failed');
INSERT INTO loans VALUES ('LN-0014', 'M-0022', 'LOT-2025-002', 1, '2025-02-20', '2025-06-20', 0, '2025-05-13', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0015', 'M-0059', 'LOT-2024-008', 2, '2025-02-20', '2025-06-20', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0016', 'M-0060', 'LOT-2024-004', 1, '2025-02-23', '2025-06-23', 0, '2025-04-27', 'grew-no-seed');
INSERT INTO loans VALUES ('LN-0017', 'M-0056', 'LOT-2025-006', 2, '2025-02-25', '2025-06-25', 0, '2025-06-01', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0018', 'M-0028', 'LOT-2024-012', 3, '2025-03-01', '2025-06-29', 0, '2025-05-06', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0019', 'M-0012', 'LOT-2023-004', 1, '2025-03-04', '2025-07-02', 0, '2025-05-07', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0020', 'M-0034', 'LOT-2024-017', 3, '2025-03-04', '2025-07-02', 0, '2025-07-10', 'failed');
INSERT INTO loans VALUES ('LN-0021', 'M-0036', 'LOT-2025-004', 2, '2025-03-04', '2025-07-02', 0, '2025-06-17', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0022', 'M-0015', 'LOT-2024-008', 1, '2025-03-15', '2025-07-13', 0, '2025-07-30', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0023', 'M-0020', 'LOT-2024-017', 1, '2025-03-19', '2025-07-17', 0, '2025-08-05', 'failed');
INSERT INTO loans VALUES ('LN-0024', 'M-0042', 'LOT-2025-004', 1, '2025-03-20', '2025-07-18', 0, '2025-05-27', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0025', 'M-0007', 'LOT-2022-008', 1, '2025-03-25', '2025-07-23', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0026', 'M-0037', 'LOT-2022-014', 2, '2025-03-25', '2025-07-23', 0, '2025-06-07', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0027', 'M-0023', 'LOT-2022-011', 2, '2025-03-27', '2025-07-25', 0, '2025-06-19', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0028', 'M-0001', 'LOT-2024-006', 2, '2025-03-31', '2025-07-29', 0, '2025-06-10', 'failed');
INSERT INTO loans VALUES ('LN-0029', 'M-0012', 'LOT-2023-005', 2, '2025-04-01', '2025-07-30', 0, '2025-06-13', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0030', 'M-0058', 'LOT-2024-027', 2, '2025-04-02', '2025-07-31', 0, '2025-06-29', 'failed');
INSERT INTO loans VALUES ('LN-0031', 'M-0015', 'LOT-2024-010', 3, '2025-04-04', '2025-08-02', 0, '2025-06-13', 'failed');
INSERT INTO loans VALUES ('LN-0032', 'M-0052', 'LOT-2025-004', 1, '2025-04-04', '2025-08-02', 0, '2025-07-01', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0033', 'M-0024', 'LOT-2024-011', 1, '2025-04-11', '2025-08-09', 0, '2025-07-13', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0034', 'M-0003', 'LOT-2022-016', 2, '2025-04-13', '2025-08-11', 0, '2025-07-17', 'grew-no-seed');
INSERT INTO loans VALUES ('LN-0035', 'M-0051', 'LOT-2025-006', 2, '2025-04-14', '2025-08-12', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0036', 'M-0008', 'LOT-2022-006', 1, '2025-04-17', '2025-08-15', 0, '2025-08-29', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0037', 'M-0036', 'LOT-2024-023', 2, '2025-04-20', '2025-08-18', 0, '2025-07-14', 'failed');
INSERT INTO loans VALUES ('LN-0038', 'M-0025', 'LOT-2024-010', 1, '2025-04-21', '2025-08-19', 0, '2025-06-25', 'failed');
INSERT INTO loans VALUES ('LN-0039', 'M-0001', 'LOT-2024-012', 1, '2025-04-23', '2025-08-21', 0, '2025-06-28', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0040', 'M-0009', 'LOT-2022-010', 1, '2025-04-24', '2025-08-22', 0, '2025-08-05', 'failed');
INSERT INTO loans VALUES ('LN-0041', 'M-0016', 'LOT-2023-003', 3, '2025-04-24', '2025-08-22', 0, '2025-06-27', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0042', 'M-0009', 'LOT-2022-001', 2, '2025-05-14', '2025-09-11', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0043', 'M-0040', 'LOT-2025-002', 2, '2025-05-19', '2025-09-16', 0, '2025-10-04', 'grew-no-seed');
INSERT INTO loans VALUES ('LN-0044', 'M-0053', 'LOT-2024-012', 3, '2025-05-19', '2025-09-16', 0, '2025-09-30', 'grew-no-seed');
INSERT INTO loans VALUES ('LN-0045', 'M-0003', 'LOT-2023-003', 1, '2025-05-20', '2025-09-17', 0, '2025-08-14', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0046', 'M-0002', 'LOT-2023-018', 1, '2025-05-21', '2025-09-18', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0047', 'M-0001', 'LOT-2022-014', 3, '2025-05-23', '2025-09-20', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0048', 'M-0014', 'LOT-2024-017', 1, '2025-05-24', '2025-09-21', 0, '2025-08-22', 'grew-no-seed');
INSERT INTO loans VALUES ('LN-0049', 'M-0058', 'LOT-2024-029', 1, '2025-05-24', '2025-09-21', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0050', 'M-0011', 'LOT-2025-004', 3, '2025-05-25', '2025-09-22', 0, '2025-09-29', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0051', 'M-0026', 'LOT-2025-005', 1, '2025-05-25', '2025-09-22', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0052', 'M-0051', 'LOT-2024-012', 2, '2025-05-25', '2025-09-22', 0, '2025-08-20', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0053', 'M-0052', 'LOT-2024-001', 1, '2025-05-25', '2025-09-22', 0, '2025-09-09', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0054', 'M-0010', 'LOT-2023-018', 1, '2025-06-04', '2025-10-02', 0, '2025-08-24', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0055', 'M-0018', 'LOT-2024-005', 1, '2025-06-04', '2025-10-02', 0, '2025-09-25', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0056', 'M-0037', 'LOT-2022-014', 3, '2025-06-04', '2025-10-02', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0057', 'M-0012', 'LOT-2024-011', 3, '2025-06-17', '2025-10-15', 0, '2025-11-04', 'grew-and-saved');
INSERT INTO loans VALUES ('LN-0058', 'M-0036', 'LOT-2024-029', 2, '2025-06-24', '2025-10-22', 0, '2025-10-18', 'grew-no-seed');
INSERT INTO loans VALUES ('LN-0059', 'M-0013', 'LOT-2022-014', 2, '2025-06-26', '2025-10-24', 0, '2025-10-13', 'grew-no-seed');
INSERT INTO loans VALUES ('LN-0060', 'M-0003', 'LOT-2024-001', 1, '2025-07-03', '2025-10-31', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0061', 'M-0060', 'LOT-2022-014', 1, '2025-07-05', '2025-11-02', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0062', 'M-0041', 'LOT-2024-018', 1, '2025-07-08', '2025-11-05', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0063', 'M-0048', 'LOT-2024-015', 2, '2025-07-11', '2025-11-08', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0064', 'M-0005', 'LOT-2022-012', 2, '2025-07-12', '2025-11-09', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0065', 'M-0003', 'LOT-2022-008', 1, '2025-07-15', '2025-11-12', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0066', 'M-0027', 'LOT-2022-002', 3, '2025-07-15', '2025-11-12', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0067', 'M-0046', 'LOT-2025-002', 1, '2025-07-17', '2025-11-14', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0068', 'M-0027', 'LOT-2024-025', 1, '2025-07-19', '2025-11-16', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0069', 'M-0033', 'LOT-2022-014', 3, '2025-07-23', '2025-11-20', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0070', 'M-0005', 'LOT-2025-011', 1, '2025-07-25', '2025-11-22', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0071', 'M-0004', 'LOT-2024-018', 1, '2025-07-27', '2025-11-24', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0072', 'M-0027', 'LOT-2022-010', 3, '2025-07-31', '2025-11-28', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0073', 'M-0042', 'LOT-2022-014', 3, '2025-08-01', '2025-11-29', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0074', 'M-0052', 'LOT-2024-009', 1, '2025-08-02', '2025-11-30', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0075', 'M-0013', 'LOT-2024-004', 1, '2025-08-05', '2025-12-03', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0076', 'M-0035', 'LOT-2023-004', 2, '2025-08-09', '2025-12-07', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0077', 'M-0050', 'LOT-2023-012', 1, '2025-08-13', '2025-12-11', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0078', 'M-0038', 'LOT-2023-005', 2, '2025-08-15', '2025-12-13', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0079', 'M-0020', 'LOT-2023-007', 2, '2025-08-17', '2025-12-15', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0080', 'M-0025', 'LOT-2025-008', 3, '2025-08-21', '2025-12-19', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0081', 'M-0041', 'LOT-2024-014', 3, '2025-08-21', '2025-12-19', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0082', 'M-0024', 'LOT-2022-009', 2, '2025-08-24', '2025-12-22', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0083', 'M-0043', 'LOT-2024-001', 2, '2025-08-26', '2025-12-24', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0084', 'M-0056', 'LOT-2025-007', 3, '2025-08-28', '2025-12-26', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0085', 'M-0055', 'LOT-2024-001', 2, '2025-08-29', '2025-12-27', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0086', 'M-0029', 'LOT-2025-002', 1, '2025-09-01', '2025-12-30', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0087', 'M-0057', 'LOT-2024-001', 1, '2025-09-02', '2025-12-31', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0088', 'M-0055', 'LOT-2022-016', 1, '2025-09-09', '2026-01-07', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0089', 'M-0041', 'LOT-2023-011', 1, '2025-09-11', '2026-01-09', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0090', 'M-0009', 'LOT-2025-011', 1, '2025-09-18', '2026-01-16', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0091', 'M-0032', 'LOT-2022-010', 3, '2025-09-18', '2026-01-16', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0092', 'M-0039', 'LOT-2024-012', 1, '2025-09-19', '2026-01-17', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0093', 'M-0010', 'LOT-2023-007', 2, '2025-09-24', '2026-01-22', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0094', 'M-0050', 'LOT-2024-018', 2, '2025-09-24', '2026-01-22', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0095', 'M-0004', 'LOT-2025-002', 2, '2025-09-25', '2026-01-23', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0096', 'M-0040', 'LOT-2024-001', 1, '2025-09-25', '2026-01-23', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0097', 'M-0021', 'LOT-2025-003', 1, '2025-09-28', '2026-01-26', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0098', 'M-0023', 'LOT-2025-007', 1, '2025-09-30', '2026-01-28', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0099', 'M-0020', 'LOT-2022-010', 1, '2025-10-04', '2026-02-01', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0100', 'M-0038', 'LOT-2023-014', 1, '2025-10-04', '2026-02-01', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0101', 'M-0031', 'LOT-2025-007', 3, '2025-10-08', '2026-02-05', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0102', 'M-0036', 'LOT-2022-013', 1, '2025-10-10', '2026-02-07', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0103', 'M-0053', 'LOT-2025-006', 3, '2025-10-10', '2026-02-07', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0104', 'M-0016', 'LOT-2024-003', 2, '2025-10-11', '2026-02-08', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0105', 'M-0051', 'LOT-2024-009', 1, '2025-10-12', '2026-02-09', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0106', 'M-0039', 'LOT-2024-008', 3, '2025-10-18', '2026-02-15', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0107', 'M-0042', 'LOT-2025-006', 1, '2025-10-24', '2026-02-21', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0108', 'M-0004', 'LOT-2022-001', 1, '2025-10-27', '2026-02-24', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0109', 'M-0039', 'LOT-2024-022', 2, '2025-11-02', '2026-03-02', 0, NULL, NULL);
INSERT INTO loans VALUES ('LN-0110', 'M-0026', 'LOT-2024-019', 1, '2025-11-05', '2026-03-05', 0, NULL, NULL);

INSERT INTO germination_tests VALUES ('GT-0001', 'LOT-2022-009', '2023-01-11', 25, 21, 84.0);
INSERT INTO germination_tests VALUES ('GT-0002', 'LOT-2022-006', '2023-01-14', 50, 41, 82.0);
INSERT INTO germination_tests VALUES ('GT-0003', 'LOT-2022-007', '2023-01-16', 25, 12, 48.0);
INSERT INTO germination_tests VALUES ('GT-0004', 'LOT-2022-012', '2023-01-20', 20, 16, 80.0);
INSERT INTO germination_tests VALUES ('GT-0005', 'LOT-2022-013', '2023-01-26', 20, 19, 95.0);
INSERT INTO germination_tests VALUES ('GT-0006', 'LOT-2022-014', '2023-02-11', 50, 41, 82.0);
INSERT INTO germination_tests VALUES ('GT-0007', 'LOT-2022-002', '2023-02-13', 25, 19, 76.0);
INSERT INTO germination_tests VALUES ('GT-0008', 'LOT-2022-011', '2023-02-13', 50, 44, 88.0);
INSERT INTO germination_tests VALUES ('GT-0009', 'LOT-2022-003', '2023-02-15', 50, 31, 62.0);
INSERT INTO germination_tests VALUES ('GT-0010', 'LOT-2022-001', '2023-02-17', 20, 19, 95.0);
INSERT INTO germination_tests VALUES ('GT-0011', 'LOT-2022-005', '2023-02-23', 20, 19, 95.0);
INSERT INTO germination_tests VALUES ('GT-0012', 'LOT-2022-010', '2023-02-24', 20, 17, 85.0);
INSERT INTO germination_tests VALUES ('GT-0013', 'LOT-2022-016', '2023-02-24', 25, 18, 72.0);
INSERT INTO germination_tests VALUES ('GT-0014', 'LOT-2022-008', '2023-03-14', 20, 16, 80.0);
INSERT INTO germination_tests VALUES ('GT-0015', 'LOT-2022-015', '2023-03-22', 25, 21, 84.0);
INSERT INTO germination_tests VALUES ('GT-0016', 'LOT-2023-002', '2024-01-10', 20, 6, 30.0);
INSERT INTO germination_tests VALUES ('GT-0017', 'LOT-2023-012', '2024-01-20', 25, 24, 96.0);
INSERT INTO germination_tests VALUES ('GT-0018', 'LOT-2023-005', '2024-01-22', 50, 40, 80.0);
INSERT INTO germination_tests VALUES ('GT-0019', 'LOT-2023-008', '2024-01-25', 20, 19, 95.0);
INSERT INTO germination_tests VALUES ('GT-0020', 'LOT-2023-018', '2024-02-11', 20, 17, 85.0);
INSERT INTO germination_tests VALUES ('GT-0021', 'LOT-2023-003', '2024-02-12', 20, 18, 90.0);
INSERT INTO germination_tests VALUES ('GT-0022', 'LOT-2023-004', '2024-02-13', 25, 18, 72.0);
INSERT INTO germination_tests VALUES ('GT-0023', 'LOT-2023-007', '2024-02-23', 25, 20, 80.0);
INSERT INTO germination_tests VALUES ('GT-0024', 'LOT-2023-011', '2024-02-27', 20, 16, 80.0);
INSERT INTO germination_tests VALUES ('GT-0025', 'LOT-2023-016', '2024-03-22', 20, 7, 35.0);
INSERT INTO germination_tests VALUES ('GT-0026', 'LOT-2023-015', '2024-03-23', 20, 16, 80.0);
INSERT INTO germination_tests VALUES ('GT-0027', 'LOT-2023-014', '2024-03-25', 25, 23, 92.0);
INSERT INTO germination_tests VALUES ('GT-0028', 'LOT-2025-011', '2025-01-10', 20, 15, 75.0);
INSERT INTO germination_tests VALUES ('GT-0029', 'LOT-2024-001', '2025-01-11', 25, 22, 88.0);
INSERT INTO germination_tests VALUES ('GT-0030', 'LOT-2024-002', '2025-01-12', 25, 12, 48.0);
INSERT INTO germination_tests VALUES ('GT-0031', 'LOT-2024-008', '2025-01-13', 20, 15, 75.0);
INSERT INTO germination_tests VALUES ('GT-0032', 'LOT-2024-023', '2025-01-16', 50, 37, 74.0);
INSERT INTO germination_tests VALUES ('GT-0033', 'LOT-2024-013', '2025-01-17', 50, 49, 98.0);
INSERT INTO germination_tests VALUES ('GT-0034', 'LOT-2025-004', '2025-01-17', 20, 18, 90.0);
INSERT INTO germination_tests VALUES ('GT-0035', 'LOT-2024-022', '2025-01-18', 20, 14, 70.0);
INSERT INTO germination_tests VALUES ('GT-0036', 'LOT-2024-012', '2025-01-19', 20, 17, 85.0);
INSERT INTO germination_tests VALUES ('GT-0037', 'LOT-2024-016', '2025-01-22', 50, 29, 58.0);
INSERT INTO germination_tests VALUES ('GT-0038', 'LOT-2024-017', '2025-01-23', 20, 17, 85.0);
INSERT INTO germination_tests VALUES ('GT-0039', 'LOT-2024-021', '2025-01-23', 25, 18, 72.0);
INSERT INTO germination_tests VALUES ('GT-0040', 'LOT-2024-027', '2025-01-23', 20, 18, 90.0);
INSERT INTO germination_tests VALUES ('GT-0041', 'LOT-2025-009', '2025-01-24', 50, 39, 78.0);
INSERT INTO germination_tests VALUES ('GT-0042', 'LOT-2025-012', '2025-01-24', 25, 19, 76.0);
INSERT INTO germination_tests VALUES ('GT-0043', 'LOT-2024-011', '2025-01-25', 25, 19, 76.0);
INSERT INTO germination_tests VALUES ('GT-0044', 'LOT-2024-006', '2025-02-10', 25, 21, 84.0);
INSERT INTO germination_tests VALUES ('GT-0045', 'LOT-2024-004', '2025-02-11', 25, 18, 72.0);
INSERT INTO germination_tests VALUES ('GT-0046', 'LOT-2025-006', '2025-02-12', 20, 16, 80.0);
INSERT INTO germination_tests VALUES ('GT-0047', 'LOT-2024-026', '2025-02-15', 50, 47, 94.0);
INSERT INTO germination_tests VALUES ('GT-0048', 'LOT-2025-003', '2025-02-17', 20, 15, 75.0);
INSERT INTO germination_tests VALUES ('GT-0049', 'LOT-2025-007', '2025-02-17', 25, 23, 92.0);
INSERT INTO germination_tests VALUES ('GT-0050', 'LOT-2024-030', '2025-02-18', 25, 14, 56.0);
INSERT INTO germination_tests VALUES ('GT-0051', 'LOT-2024-003', '2025-02-21', 50, 44, 88.0);
INSERT INTO germination_tests VALUES ('GT-0052', 'LOT-2025-001', '2025-02-21', 50, 19, 38.0);
INSERT INTO germination_tests VALUES ('GT-0053', 'LOT-2024-010', '2025-02-23', 25, 21, 84.0);
INSERT INTO germination_tests VALUES ('GT-0054', 'LOT-2024-014', '2025-02-24', 25, 23, 92.0);
INSERT INTO germination_tests VALUES ('GT-0055', 'LOT-2024-025', '2025-02-25', 20, 16, 80.0);
INSERT INTO germination_tests VALUES ('GT-0056', 'LOT-2025-005', '2025-02-28', 20, 17, 85.0);
INSERT INTO germination_tests VALUES ('GT-0057', 'LOT-2024-018', '2025-03-11', 20, 18, 90.0);
INSERT INTO germination_tests VALUES ('GT-0058', 'LOT-2024-007', '2025-03-12', 50, 41, 82.0);
INSERT INTO germination_tests VALUES ('GT-0059', 'LOT-2024-015', '2025-03-12', 25, 22, 88.0);
INSERT INTO germination_tests VALUES ('GT-0060', 'LOT-2024-029', '2025-03-13', 50, 37, 74.0);
INSERT INTO germination_tests VALUES ('GT-0061', 'LOT-2024-028', '2025-03-17', 25, 20, 80.0);
INSERT INTO germination_tests VALUES ('GT-0062', 'LOT-2025-008', '2025-03-17', 50, 37, 74.0);
INSERT INTO germination_tests VALUES ('GT-0063', 'LOT-2025-002', '2025-03-18', 25, 24, 96.0);
INSERT INTO germination_tests VALUES ('GT-0064', 'LOT-2024-005', '2025-03-20', 25, 24, 96.0);
INSERT INTO germination_tests VALUES ('GT-0065', 'LOT-2024-009', '2025-03-24', 25, 19, 76.0);
INSERT INTO germination_tests VALUES ('GT-0066', 'LOT-2024-019', '2025-03-27', 25, 23, 92.0);
