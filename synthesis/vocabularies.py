"""Long-tail domains and their vocabularies, which the capability skeletons read field by field.

A domain is not a renamed string: it carries the entity nouns and realistic id formats, real names
and categories, a numeric measure with a realistic unit and range plus an alternative unit and its
conversion factor (for unit-mismatch dirtiness), an event noun, and statuses with one that must be
excluded. Skeletons read these fields, so changing the domain changes every file the agent sees.

Id patterns: `#` is a digit, `@` an upper-case letter, anything else is literal.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


class UnknownDomainError(KeyError):
    """A domain name that is not in synthesis/vocabularies.py."""


@dataclass(frozen=True)
class Domain:
    name: str  # slug, e.g. "apiculture"
    title: str  # human title, e.g. "beehive inventory"
    entity: str  # singular noun used in column names, e.g. "hive"
    entities: str  # plural, used in file names
    id_pattern: str  # e.g. "HV-####"
    names: tuple[str, ...]  # realistic display names, at least 12, unique
    group: str  # grouping noun, e.g. "apiary"
    groups: tuple[str, ...]  # realistic group names, at least 4
    group_code_pattern: str  # code used in cross-reference tables
    category: str  # categorical attribute, e.g. "race"
    categories: tuple[str, ...]  # at least 4
    measure: str  # numeric measure column stem, e.g. "honey_yield"
    unit: str  # canonical unit
    low: float  # realistic range of one reading, canonical unit
    high: float
    decimals: int  # precision readings are recorded at
    alt_unit: str  # alternative unit seen in dirty sources
    alt_factor: float  # value_in_alt_unit = value_in_unit * alt_factor
    event: str  # what one record is, e.g. "inspection"
    statuses: tuple[str, ...]  # entity statuses; the first is the ordinary one
    excluded_status: str  # entities with this status are out of scope
    # How readings of the measure combine per entity: sum (yields, volumes, distances travelled),
    # mean (a level sampled repeatedly: fuel load, discharge, body mass), max (a peak: snow depth,
    # a longest contact) or latest (a state re-measured: a trunk's diameter, a route's length).
    aggregate: str = "sum"

    def __post_init__(self) -> None:
        if self.aggregate not in AGGREGATES:
            raise ValueError(
                f"domain {self.name!r}: aggregate must be one of {AGGREGATES}, got {self.aggregate!r}"
            )

    def vocabulary(self) -> dict[str, Any]:
        """The literal a rendered generator embeds as `V`."""
        d = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


AGGREGATES = ("sum", "mean", "max", "latest")


def _s(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split("|"))


# One domain per block reads better than one argument per line.
# fmt: off
_ALL = (
    Domain("apiculture", "beehive inventory", "hive", "hives", "HV-####",
           _s("Linden|Clover|Heather|Acacia|Borage|Sainfoin|Phacelia|Rapeseed|Chestnut|Willowherb|Bramble|Sunflower|Thyme|Lavender"),
           "apiary", _s("Orchard Hill Apiary|Mill Lane Apiary|Riverside Apiary|Old Quarry Apiary|Heath End Apiary"), "AP-##",
           "race", _s("Carniolan|Italian|Buckfast|Caucasian|Dark European"),
           "honey_yield", "kg", 2.0, 35.0, 1, "lb", 2.20462, "inspection",
           _s("active|queenless|nucleus|dead_out"), "dead_out"),
    Domain("trail_maintenance", "trail maintenance logs", "segment", "segments", "SEG-###@",
           _s("Ridge Loop|Cedar Switchback|Falls Spur|Lookout Connector|Beaver Pond Trail|Hemlock Ravine|Summit Approach|Old Logging Road|Meadow Traverse|Creek Crossing|Bluff Overlook|Sawmill Grade|Fern Gully|Saddle Cutoff"),
           "district", _s("North Fork District|Granite Basin District|Lower Valley District|Timberline District|Coastal Range District"), "D##",
           "surface", _s("native soil|gravel|boardwalk|puncheon|rock armoring"),
           "tread_repaired", "m", 5.0, 400.0, 1, "ft", 3.28084, "work_log",
           _s("open|partially_open|closed_for_season|decommissioned"), "decommissioned"),
    Domain("amateur_radio", "amateur-radio contact logs", "station", "stations", "@#@@@",
           _s("Harbor Hill ARC|Granite State DX|Blue Ridge Contesters|Prairie Wind Net|Cascade Repeater Group|Delta Ham Society|Lakeshore ARES|Mesa Top DXers|Pine Barrens ARC|Tidewater Radio Club|Iron Range Hams|Sierra Foothill ARS|Coastal Bend DX|Red River Valley ARC"),
           "section", _s("Eastern Massachusetts|Northern Florida|West Texas|Oregon|Minnesota|Santa Barbara"), "@@@",
           "band", _s("20m|40m|80m|15m|10m|2m"),
           "contact_distance", "km", 40.0, 12000.0, 0, "mi", 0.621371, "qso",
           _s("confirmed|pending|unconfirmed|busted"), "busted", aggregate="max"),
    Domain("herbarium_loans", "herbarium specimen loans", "specimen", "specimens", "HB-######",
           _s("Quercus alba|Carex pensylvanica|Solidago rugosa|Acer rubrum|Viola sororia|Trillium erectum|Betula papyrifera|Aster puniceus|Juncus effusus|Sphagnum palustre|Rosa carolina|Poa pratensis|Fagus grandifolia|Lilium canadense"),
           "institution", _s("Missouri Botanical Garden|New York Botanical Garden|Harvard University Herbaria|Field Museum|Royal Botanic Garden Edinburgh"), "@@@@",
           "family", _s("Fagaceae|Cyperaceae|Asteraceae|Rosaceae|Poaceae|Betulaceae"),
           "packet_weight", "g", 5.0, 120.0, 1, "oz", 0.035274, "loan",
           _s("on_loan|returned|overdue|deaccessioned"), "deaccessioned", aggregate="latest"),
    Domain("community_fridge", "community-fridge restocking", "fridge", "fridges", "CF-###",
           _s("Corner Bodega Fridge|Library Steps Fridge|St. Anne's Fridge|Laundromat Fridge|Park Gate Fridge|Union Hall Fridge|Night Market Fridge|Clinic Fridge|Co-op Porch Fridge|Bus Depot Fridge|Garden Shed Fridge|Mosque Annex Fridge|Studio Alley Fridge|Rec Center Fridge"),
           "neighborhood", _s("Eastside|Old Town|Riverbend|Northgate|Little Havana|Mill District"), "NB-#",
           "host_type", _s("bodega|church|library|mutual aid hub|community center"),
           "food_restocked", "kg", 1.0, 60.0, 1, "lb", 2.20462, "restock",
           _s("active|needs_repair|paused|removed"), "removed"),
    Domain("vineyard_blocks", "vineyard block harvest records", "block", "blocks", "BLK-##@",
           _s("Upper Terrace|Creekside|Old Vine|Schoolhouse|Hawk Ridge|Lone Oak|South Slope|Gravel Bench|Windmill|Cellar Door|Fog Hollow|Red Barn|Quarry Edge|Lower Flat"),
           "estate", _s("Sonoma Ridge Estate|Willamette Hills Estate|Finger Lakes Estate|Paso Robles Estate"), "EST-#",
           "varietal", _s("Pinot Noir|Chardonnay|Riesling|Syrah|Grenache|Cabernet Franc"),
           "harvest_weight", "kg", 200.0, 4000.0, 0, "lb", 2.20462, "pick",
           _s("producing|young_vines|replanting|grubbed_up"), "grubbed_up"),
    Domain("public_aquarium", "public aquarium tank husbandry", "tank", "tanks", "TK-###",
           _s("Reef Display|Kelp Forest|Jellyfish Kreisel|Mangrove Lagoon|Seahorse Nursery|Octopus Den|Tide Pool Touch|Amazon Flooded Forest|Shark Shallows|Coral Propagation|Rocky Shore|Cichlid Rift|Cuttlefish Tank|Penguin Pool"),
           "gallery", _s("Tropical Gallery|Cold Water Gallery|Freshwater Hall|Quarantine Wing|Behind the Scenes"), "GAL-#",
           "biotope", _s("Indo-Pacific reef|temperate kelp|Amazon blackwater|African rift lake|mangrove"),
           "top_off_volume", "L", 5.0, 400.0, 1, "gal", 0.264172, "water_change",
           _s("on_display|quarantine|cycling|decommissioned"), "decommissioned"),
    Domain("bike_share", "bike-share dock trips", "dock", "docks", "DK-####",
           _s("5th & Pine|Union Station|Harbor Pier|City Hall Plaza|Elm & 3rd|University Gate|Market Square|Riverside Park|Central Library|Stadium North|Greenway Trailhead|Broadway & 9th|Ferry Terminal|Museum Row"),
           "service_zone", _s("Downtown|Waterfront|Campus|Midtown|Southside"), "Z#",
           "dock_type", _s("classic|electric|mixed|valet"),
           "trip_distance", "km", 0.5, 18.0, 2, "mi", 0.621371, "trip",
           _s("in_service|low_battery|maintenance|decommissioned"), "decommissioned"),
    Domain("seed_library", "seed library lending", "seed_lot", "seed_lots", "SL-####",
           _s("Cherokee Purple Tomato|Dragon Tongue Bean|Moon and Stars Melon|Glass Gem Corn|Lemon Cucumber|Scarlet Runner Bean|Blue Hubbard Squash|Jimmy Nardello Pepper|Red Russian Kale|Bloody Butcher Corn|Amish Paste Tomato|Tromboncino Squash|Lacinato Kale|Chioggia Beet"),
           "branch", _s("Central Branch|Westside Branch|Hillcrest Branch|Bayview Branch|Southport Branch"), "BR-##",
           "crop_family", _s("Solanaceae|Fabaceae|Cucurbitaceae|Poaceae|Brassicaceae|Amaranthaceae"),
           "seed_weight", "g", 2.0, 90.0, 1, "oz", 0.035274, "checkout",
           _s("available|low_stock|quarantined|discarded"), "discarded"),
    Domain("wildfire_fuel_plots", "wildfire fuel-load plots", "plot", "plots", "FP-@###",
           _s("Dry Creek Flats|Manzanita Ridge|Burnt Cabin|Ponderosa Bench|Chaparral Saddle|Cold Springs|Juniper Draw|Lodgepole Basin|Bear Wallow|Cinder Cone|Sagebrush Mesa|Aspen Glade|Rattlesnake Gulch|Fir Hollow"),
           "ranger_district", _s("Big Valley RD|Sierraville RD|Mount Hough RD|Beckwourth RD|Feather River RD"), "RD-##",
           "fuel_model", _s("grass|grass-shrub|shrub|timber litter|slash"),
           "fuel_load", "t/ha", 0.5, 80.0, 2, "tons/acre", 0.44609, "transect",
           _s("monitored|treated|burned|retired"), "retired", aggregate="mean"),
    Domain("brewery_cellar", "brewery cellar transfers", "fermenter", "fermenters", "FV-##",
           _s("Hazy Lane IPA|Dockside Pilsner|Smoked Porter|Saison du Quai|Oatmeal Stout|Kolsch Ferry|Rye Pale Ale|Berliner Weisse|Barrel Brown|Table Beer|Dunkel Lager|Gose Harbor|Red Ale Nine|Winter Warmer"),
           "cellar", _s("Main Cellar|Barrel Room|Annex Cellar|Lagering Cave"), "CEL-#",
           "style", _s("lager|ale|sour|stout|wheat"),
           "volume_transferred", "L", 100.0, 3000.0, 0, "bbl", 0.00852168, "transfer",
           _s("fermenting|conditioning|clean|out_of_service"), "out_of_service"),
    Domain("marina_slips", "marina slip fuel sales", "slip", "slips", "SLP-@##",
           _s("Sea Whisper|Blue Heron|Lady Grace|Second Wind|Salt Shaker|Osprey|Knot Today|Reel Therapy|Marlin Dream|Wind Dancer|Tidal Grace|Cormorant|Happy Hour|Morning Star"),
           "dock", _s("A Dock|B Dock|C Dock|Transient Dock|Fuel Dock"), "DCK-#",
           "berth_class", _s("30 ft|40 ft|50 ft|catamaran|mooring ball"),
           "fuel_dispensed", "L", 20.0, 900.0, 1, "gal", 0.264172, "fuel_sale",
           _s("leased|transient|winter_storage|vacated"), "vacated"),
    Domain("textile_conservation", "museum textile light-exposure logs", "textile", "textiles", "TX.####.##",
           _s("Baltimore Album Quilt|Paisley Shawl|Ikat Coat|Sampler 1790|Silk Wedding Gown|Navajo Chief Blanket|Kesi Panel|Crazy Quilt|Kente Cloth|Lace Collar|Embroidered Banner|Mola Panel|Suzani Hanging|Jacquard Coverlet"),
           "gallery", _s("American Wing|Asian Textiles Gallery|Costume Institute|Study Storage|Loan Gallery"), "G##",
           "fibre", _s("silk|wool|cotton|linen|mixed fibre"),
           "light_exposure", "klux-hours", 1.0, 120.0, 2, "lux-hours", 1000.0, "exposure_log",
           _s("on_view|in_storage|in_treatment|deaccessioned"), "deaccessioned"),
    Domain("urban_trees", "urban street-tree inventory", "tree", "trees", "TREE-#####",
           _s("London plane|Pin oak|Honey locust|Little-leaf linden|Ginkgo|Red maple|Callery pear|Zelkova|Sweetgum|Hackberry|Swamp white oak|Kentucky coffeetree|Tulip tree|American elm"),
           "ward", _s("Ward 1|Ward 2|Ward 3|Ward 4|Ward 5|Ward 6"), "W-##",
           "condition", _s("good|fair|poor|critical"),
           "trunk_diameter", "cm", 5.0, 140.0, 1, "in", 0.393701, "survey",
           _s("standing|scheduled_prune|stump|removed"), "removed", aggregate="latest"),
    Domain("vaccine_cold_chain", "clinic vaccine cold-chain logs", "storage_unit", "storage_units", "FRG-###",
           _s("Pharmacy Fridge A|Pharmacy Fridge B|Pediatrics Freezer|Travel Clinic Fridge|Mobile Van Cooler|ER Fridge|Ward 3 Fridge|Satellite Clinic Fridge|Ultra-cold Freezer 1|Ultra-cold Freezer 2|Backup Cooler|School Clinic Fridge|Outreach Cooler|Dialysis Fridge"),
           "clinic", _s("Main Hospital|Northside Clinic|Harbor Health Center|County Outreach"), "CL-##",
           "unit_type", _s("purpose-built fridge|household fridge|freezer|ultra-cold freezer|transport cooler"),
           "excursion_duration", "min", 2.0, 240.0, 0, "h", 0.0166667, "excursion",
           _s("in_use|standby|under_repair|retired"), "retired"),
    Domain("river_gauging", "river gauging stations", "gauge", "gauges", "########",
           _s("Elk Creek at Baker|Salmon River near Whitebird|Kings River below Pine Flat|Yampa River at Deerlodge|Little Miami at Milford|Cedar River at Renton|Rock Creek at Sherrill|Gunnison at Delta|Blackfoot near Bonner|Clearwater at Orofino|Big Sioux at Akron|Wapsipinicon near Tripoli|Roaring Fork at Glenwood|Santiam at Jefferson"),
           "basin", _s("Columbia Basin|Upper Colorado|Ohio Basin|Missouri Basin|Puget Sound"), "HUC##",
           "gauge_type", _s("stilling well|bubbler|radar|acoustic velocity"),
           "discharge", "cumecs", 0.5, 900.0, 2, "cfs", 35.3147, "measurement",
           _s("active|seasonal|ice_affected|discontinued"), "discontinued", aggregate="mean"),
    Domain("bird_banding", "bird-banding station recaptures", "band", "bands", "####-#####",
           _s("Black-capped Chickadee|Song Sparrow|Gray Catbird|Yellow Warbler|American Robin|Common Yellowthroat|Swainson's Thrush|Red-eyed Vireo|White-throated Sparrow|Ovenbird|Northern Cardinal|House Wren|Hermit Thrush|Cedar Waxwing"),
           "station", _s("Braddock Bay|Powdermill|Long Point|Manomet|Point Reyes"), "ST-@@",
           "age_class", _s("HY|AHY|SY|ASY|U"),
           "body_mass", "g", 6.0, 95.0, 1, "oz", 0.035274, "recapture",
           _s("live|injured|released_rehab|found_dead"), "found_dead", aggregate="mean"),
    Domain("makerspace_tools", "makerspace tool checkouts", "tool", "tools", "TL-###",
           _s("Bandsaw|Laser Cutter|CNC Router|Drill Press|Sewing Machine|3D Printer Prusa|Lathe|Thickness Planer|Vinyl Cutter|Oscilloscope|TIG Welder|Kiln|Embroidery Machine|Belt Sander"),
           "shop_area", _s("Wood Shop|Metal Shop|Electronics Bench|Textile Studio|Digital Fab Lab"), "SA-#",
           "tool_class", _s("power tool|machine tool|digital fabrication|hand tool|test equipment"),
           "usage_time", "h", 0.25, 8.0, 2, "min", 60.0, "checkout",
           _s("available|reserved|needs_training|out_for_repair"), "out_for_repair"),
    Domain("greenhouse_benches", "greenhouse bench irrigation", "bench", "benches", "GH#-B##",
           _s("Propagation North|Propagation South|Orchid Bench|Cactus Bench|Seedling Flats|Tomato Trial|Herb Trial|Fern Corner|Cutting Mist|Lettuce Raft|Pepper Trial|Bromeliad Bench|Vanda Rack|Carnivorous Bog"),
           "house", _s("Glasshouse 1|Glasshouse 2|Polytunnel East|Research Range"), "GH-#",
           "crop", _s("ornamentals|vegetables|orchids|succulents|herbs"),
           "irrigation_volume", "L", 2.0, 150.0, 1, "gal", 0.264172, "watering",
           _s("in_use|fallow|disinfection|dismantled"), "dismantled"),
    Domain("food_bank", "food bank pallet receipts", "pallet", "pallets", "PLT-######",
           _s("Canned Vegetables|Rice Bags|Peanut Butter|Shelf Milk|Pasta|Canned Tuna|Oatmeal|Dried Beans|Infant Formula|Cereal|Canned Fruit|Flour|Cooking Oil|Frozen Chicken"),
           "warehouse", _s("Main Warehouse|Eastside Depot|Cold Storage Annex|Rural Hub"), "WH-#",
           "food_category", _s("dry goods|canned|dairy|protein|produce|infant"),
           "gross_weight", "kg", 40.0, 950.0, 1, "lb", 2.20462, "receipt",
           _s("received|staged|distributed|recalled"), "recalled"),
    Domain("route_setting", "climbing gym route setting", "route", "routes", "RT-####",
           _s("Crimson Arete|Slab Happy|Pinch Me|The Prow|Dyno Mite|Crimp Scampi|Overhang Tango|Jug Haul|Sloper Soup|Corner Store|Mantle Piece|Tufa King|Heel Hook Heaven|Chimney Sweep"),
           "wall", _s("Lead Cave|Slab Wall|Comp Wall|Bouldering Barrel|Kids Wall"), "WL-#",
           "grade_band", _s("5.8-5.9|5.10|5.11|5.12|V0-V2|V3-V5"),
           "route_length", "m", 4.0, 22.0, 1, "ft", 3.28084, "reset",
           _s("up|flagged|being_set|stripped"), "stripped", aggregate="latest"),
    Domain("observatory", "observatory instrument time logs", "instrument", "instruments", "INS-@@#",
           _s("Echelle Spectrograph|Wide-field Imager|Near-IR Camera|Polarimeter|Fiber Spectrograph|Photometer|Coronagraph|Lucky Imager|Guide Camera|Integral Field Unit|Solar Telescope|Radio Receiver|Fast Photometer|Allsky Camera"),
           "telescope", _s("0.9 m Reflector|2.1 m Reflector|1.3 m Robotic|Solar Tower"), "T##",
           "band_pass", _s("U|B|V|R|I|H-alpha"),
           "exposure_time", "s", 5.0, 3600.0, 0, "min", 0.0166667, "observation",
           _s("scheduled|engineering|offline|decommissioned"), "decommissioned"),
    Domain("mushroom_farm", "mushroom grow-room harvests", "grow_block", "grow_blocks", "GR#-####",
           _s("Blue Oyster Rack|Lion's Mane Shelf|Shiitake Log Stack|King Oyster Rack|Pink Oyster Shelf|Chestnut Rack|Pioppino Shelf|Maitake Tray|Reishi Antler Rack|Enoki Jar Rack|Golden Oyster Shelf|Wine Cap Bed|Nameko Shelf|Black Pearl Rack"),
           "grow_room", _s("Room A|Room B|Fruiting Tent|Incubation Room"), "RM-#",
           "substrate", _s("hardwood sawdust|straw|masters mix|hardwood logs|coco coir"),
           "flush_yield", "kg", 0.2, 9.0, 2, "lb", 2.20462, "harvest",
           _s("fruiting|incubating|resting|contaminated"), "contaminated"),
    Domain("animal_shelter", "animal shelter kennel feeding", "animal", "animals", "A#######",
           _s("Biscuit|Luna|Mochi|Rocket|Pepper|Juniper|Bandit|Clementine|Ziggy|Maple|Otis|Nala|Waffles|Scout"),
           "kennel_block", _s("Dog Run East|Dog Run West|Cattery|Small Animals|Isolation"), "KB-#",
           "species", _s("dog|cat|rabbit|guinea pig|ferret"),
           "food_dispensed", "g", 30.0, 900.0, 0, "oz", 0.035274, "feeding",
           _s("available|on_hold|in_foster|adopted"), "adopted"),
    Domain("canal_locks", "canal lock operations", "lock", "locks", "LK-##",
           _s("Bingley Five Rise|Caen Hill Top|Foxton Staircase|Tardebigge Top|Hatton Bottom|Marple Lock|Wigan Flight Top|Devizes Wharf|Neptune's Staircase|Tuel Lane|Grindley Brook|Audlem Bottom|Stoke Bruerne|Hillmorton Twin"),
           "waterway", _s("Kennet and Avon|Leeds and Liverpool|Grand Union|Shropshire Union|Caledonian"), "WW-##",
           "lock_type", _s("single|staircase|twin|flood"),
           "water_released", "kL", 80.0, 1500.0, 0, "ML", 0.001, "lockage",
           _s("operational|restricted|stoppage|abandoned"), "abandoned"),
    Domain("school_buses", "school bus route runs", "bus", "buses", "BUS-###",
           _s("Route 1 Maple|Route 2 Lakeview|Route 3 Ridge|Route 4 Orchard|Route 5 Mill|Route 6 Prairie|Route 7 Harbor|Route 8 Summit|Route 9 Valley|Route 10 Creek|Route 11 Pines|Route 12 Meadow|Route 14 Station|Route 15 Grange"),
           "depot", _s("North Depot|South Depot|Central Garage|Eastfield Lot"), "DP-#",
           "bus_type", _s("type A|type C|type D|wheelchair lift|activity bus"),
           "route_distance", "km", 4.0, 95.0, 1, "mi", 0.621371, "run",
           _s("in_service|spare|inspection_due|retired"), "retired"),
    Domain("sheep_flock", "sheep flock shearing records", "ewe", "ewes", "@@######",
           _s("Bramble|Dolly|Fern|Heather|Clover|Mabel|Pearl|Ivy|Bluebell|Nettle|Poppy|Snowdrop|Willow|Daisy"),
           "flock", _s("Hill Flock|Lowland Flock|Pedigree Flock|Ewe Lamb Group"), "FL-#",
           "breed", _s("Texel|Suffolk|Cheviot|Swaledale|Jacob|Merino"),
           "fleece_weight", "kg", 1.2, 7.5, 2, "lb", 2.20462, "shearing",
           _s("breeding|dry|cull_listed|sold"), "sold"),
    Domain("solar_microgrid", "solar microgrid meter reads", "inverter", "inverters", "INV-##-@",
           _s("Clinic Roof|School Roof|Water Pump Array|Market Canopy|Mill Roof|Health Post|Community Hall|Grain Store|Borehole Array|Teacher Housing|Church Roof|Cold Room|Workshop Roof|Street Lights"),
           "feeder", _s("Feeder North|Feeder South|Feeder Market|Feeder Pump"), "FD-#",
           "panel_tech", _s("monocrystalline|polycrystalline|thin film|bifacial"),
           "energy_delivered", "kWh", 2.0, 180.0, 2, "MJ", 3.6, "meter_read",
           _s("online|derated|fault|disconnected"), "disconnected"),
    Domain("maple_sugaring", "maple sugarbush sap collection", "tap_line", "tap_lines", "TAP-####",
           _s("North Slope Mainline|Sugar Shack Lateral|Beaver Meadow Line|Ledges Mainline|Old Road Lateral|Spring Hollow Line|Birch Knoll Line|Cemetery Lateral|Brook Crossing Line|Upper Ridge Mainline|Cabin Lateral|Pasture Edge Line|Hemlock Dip Line|Fox Den Lateral"),
           "sugarbush", _s("Home Sugarbush|Back Forty|Hilltop Lease|Valley Lease"), "SB-#",
           "tubing", _s("3/16 gravity|5/16 vacuum|buckets|mainline vacuum"),
           "sap_collected", "L", 30.0, 2500.0, 0, "gal", 0.264172, "collection",
           _s("running|frozen|leaking|abandoned"), "abandoned"),
    Domain("archive_digitisation", "archive box digitisation", "archive_box", "archive_boxes", "BX-#####",
           _s("Mayor's Correspondence|Harbour Board Minutes|Parish Registers|Mill Payrolls|School Photographs|Railway Timetables|Land Deeds|Suffrage Pamphlets|Ship Manifests|Census Notebooks|Theatre Programmes|Hospital Ledgers|Trade Union Records|Estate Maps"),
           "collection", _s("Municipal Records|Maritime Collection|Family Papers|Industrial Heritage|Local Studies"), "COL-##",
           "material", _s("loose papers|bound volumes|photographs|maps|pamphlets"),
           "storage_used", "GB", 0.5, 60.0, 2, "MB", 1024.0, "scan_batch",
           _s("scanned|in_progress|queued|withdrawn"), "withdrawn"),
    Domain("coral_nursery", "coral restoration nursery monitoring", "fragment", "fragments", "CRL-@###",
           _s("Staghorn Tree 1|Staghorn Tree 2|Elkhorn Line|Boulder Brain Plug|Pillar Coral Rope|Star Coral Plug|Mustard Hill Dome|Finger Coral Line|Lettuce Coral Tray|Rose Coral Block|Fire Coral Tree|Table Coral Frame|Brain Coral Disk|Cactus Coral Tray"),
           "nursery", _s("Key Largo Nursery|Looe Key Nursery|Tavernier Nursery|Marathon Nursery"), "NS-#",
           "genus", _s("Acropora|Orbicella|Diploria|Porites|Montastraea|Pseudodiploria"),
           "linear_extension", "cm", 0.3, 25.0, 2, "mm", 10.0, "monitoring",
           _s("growing|bleached|outplanted|dead"), "dead"),
    Domain("avalanche_plots", "avalanche study plot snow pits", "study_plot", "study_plots", "SP-##@",
           _s("Red Mountain Pass|Berthoud Study Plot|Loveland Basin|Teton Pass|Galena Summit|Stevens Pass|Snoqualmie Flats|Mount Baker Ridge|Alta Collins|Brighton Crest|Bridger Bowl|Beartooth Pass|Crystal Gulch|Hatcher Pass"),
           "forecast_zone", _s("Northern San Juan|Front Range|Tetons|Sawtooth|Cascades West|Wasatch"), "FZ-##",
           "aspect", _s("north|northeast|east|south|west|northwest"),
           "snow_depth", "cm", 20.0, 380.0, 0, "in", 0.393701, "pit_observation",
           _s("active|wind_scoured|snowmobile_track|abandoned"), "abandoned", aggregate="max"),
    Domain("oyster_farm", "oyster farm lease harvests", "cage", "cages", "OC-####",
           _s("Pemaquid Line 1|Pemaquid Line 2|Damariscotta Raft|Glidden Point Bag|Wellfleet Rack|Duxbury Floating|Blue Point Tray|Kumamoto Longline|Shigoku Bag|Totten Inlet Rack|Hama Hama Line|Chesapeake Float|Island Creek Bag|Beausoleil Tray"),
           "lease", _s("North Cove Lease|Salt Pond Lease|Bay Mouth Lease|River Lease"), "LS-##",
           "gear_type", _s("floating bag|bottom cage|longline|rack and bag|tray"),
           "harvest_weight", "kg", 5.0, 240.0, 1, "lb", 2.20462, "harvest",
           _s("growing|market_size|overwintering|lost"), "lost"),
)
# fmt: on

DOMAINS: dict[str, Domain] = {d.name: d for d in _ALL}


def domain_names() -> list[str]:
    """Stable order, for round-robin synthesis."""
    return list(DOMAINS)


def get_domain(name: str) -> Domain:
    if name not in DOMAINS:
        raise UnknownDomainError(
            f"unknown domain {name!r}; see synthesis/vocabularies.py for the {len(DOMAINS)} domains"
        )
    return DOMAINS[name]
