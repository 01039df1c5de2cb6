"""The value pools and shares the generator draws from, after DuckDB's answers on the full dataset."""

from __future__ import annotations

N_FULL = 99_997_497  # rows of the real dataset

NAMED_COUNTERS = [
    (3922, 8.53),
    (199550, 7.12),
    (122612, 3.57),
    (233773, 2.94),
    (245438, 2.51),
    (256004, 0.86),
    (62, 0.74),
]
# 30 more counters above 0.1 % of the rows each (NOTES: at least 25 counters have more than 100k).
MID_COUNTERS = [(1_000_003 + 7919 * k, round(0.62 * 0.93**k, 3)) for k in range(30)]
TAIL_COUNTERS = 10_000
NAMED_REGIONS = [
    (229, 18.30),
    (2, 6.69),
    (208, 4.26),
    (169, 3.32),
    (32, 1.84),
    (34, 1.79),
    (184, 1.76),
    (42, 1.54),
    (107, 1.52),
    (51, 1.44),
]
TAIL_REGIONS = 3000
HEAVY_USERS = [29097, 25333, 10597, 9480, 8210, 7330, 6570, 5900, 5350, 4906]  # rows of the top users
HEAVY_IPS = [47008, 30125, 21400, 17800, 15020, 13300, 12100, 11000, 10300, 9710]  # rows of the top IPs
ADV_ENGINES = [
    (0, N_FULL - 630_500),
    (2, 404_602),
    (27, 113_167),
    (13, 45_631),
    (45, 38_960),
    (44, 9_730),
    (3, 6_896),
    (62, 5_266),
    (52, 3_554),
    (50, 900),
    (12, 600),
    (19, 400),
    (32, 250),
    (22, 180),
    (49, 130),
    (16, 100),
    (48, 80),
    (30, 34),
    (58, 20),
]
WIDTHS = [
    (1920, 1080, 24),
    (1366, 768, 23),
    (1280, 1024, 15),
    (1600, 900, 8),
    (1440, 900, 7),
    (1680, 1050, 6),
    (1024, 768, 7),
    (2560, 1440, 2.5),
    (1536, 864, 4),
    (1360, 768, 2),
    (0, 0, 2),
]
TOP_URLS = [
    ("http://liver.ru/belgorod/page/1006.jки/доп_приборы", 3.30),
    ("http://kinopoisk.ru", 1.63),
    ("http://bdsm_po_yers=0&with_video", 0.80),
    ("http://video.yandex", 0.60),
    ("http://smeshariki.ru/a-albumshowtopic/8/", 0.50),
    ("http://auto.ru/chatay-barana.ru/traction.html#maybettaya", 0.50),
    ("http://liver.ru/place_rukodel=365115eb7bbb90", 0.40),
    ("http://afisha.mail.ru/catalog/314/women.ru/ency=1&page3/?errovat-pinniki", 0.35),
    ("http://kinopoisk.ru/film/", 0.30),
    ("http://video.yandex.ru/", 0.22),
]
# Sites of the counters: obfuscated hosts, often without a TLD (NOTES).
SITE_WORDS = ["liver", "domics", "kino", "auto", "go.mail", "smeshariki", "afisha", "povarenok", "ria", "irr", "avito"]
SITE_SUFFIXES = ["", ".ru", ".ru", ".com", ".net", ".info", ".org"]
SECTIONS = ["catalog", "news", "page", "forum", "photo", "video", "search", "board", "item", "cgi-bin"]
URL_PATH_LENGTHS = [40, 70, 100, 140, 190, 250, 330, 430]  # URL length classes: 75..469 bytes on average
REFERER_DOMAINS = [
    ("go.mail", 8.23),
    ("google.ru", 2.16),
    ("bonprix.ru", 1.13),
    ("e96.ru", 1.02),
    ("mysw.info", 0.98),
    *[
        (f"{word}{suffix}", round(0.9 * 0.9**k, 3))
        for k, (word, suffix) in enumerate(
            (w, s)
            for s in (".ru", "")
            for w in (
                "yandex",
                "vk",
                "avito",
                "auto",
                "kinopoisk",
                "rambler",
                "mail",
                "odnoklassniki",
                "irr",
                "drom",
                "livejournal",
                "kino",
            )
        )
    ],
]
REFERER_TAIL = 2000
REFERER_PATH_LENGTHS = [45, 80, 120, 160, 200, 240, 275]  # Referer length classes: 75..308 bytes on average
PHRASE_WORDS = [
    "карелки",
    "купить",
    "смотреть",
    "онлайн",
    "бесплатно",
    "фильм",
    "погода",
    "москва",
    "видео",
    "скачать",
    "игры",
    "работа",
    "авто",
    "продажа",
    "квартира",
    "ремонт",
    "отзывы",
    "цена",
    "новости",
    "рецепт",
    "мультики",
    "сериал",
    "как",
    "сделать",
    "своими",
    "руками",
    "фото",
    "одноклассники",
    "вконтакте",
    "карта",
    "екатеринбург",
    "телефон",
    "ноутбук",
    "платье",
    "детские",
    "обои",
    "музыка",
    "песни",
    "торрент",
    "интернет",
    "galaxy",
    "table",
    "iphone",
    "samsung",
    "nokia",
    "windows",
    "minecraft",
    "skype",
    "lada",
    "bmw",
]
TOP_PHRASES = [
    ("карелки", 70263),
    ("мангу в зарабей грама", 36400),
    ("сколько мытищи", 30700),
    ("как укладываются в 2013", 26900),
    ("galaxy table", 21200),
    ("фильмы онлайн", 18300),
    (" смотреть мультфильмы", 16100),
    ("одноклассники", 14800),
    ("погода в москве", 13500),
    ("vk.com", 12100),
]
TITLE_WORDS = [
    "Купить",
    "Смотреть",
    "онлайн",
    "бесплатно",
    "Новости",
    "Каталог",
    "Фото",
    "Видео",
    "Форум",
    "Главная",
    "страница",
    "Отзывы",
    "цены",
    "в Москве",
    "в Екатеринбурге",
    "Продажа",
    "Аренда",
    "квартир",
    "автомобилей",
    "Работа",
    "Погода",
    "Рецепты",
    "Игры",
    "Фильмы",
    "Музыка",
    "Доска объявлений",
    "Сериалы",
    "Знакомства",
]
MOBILE_MODELS = [
    ("", 920),
    ("iPad", 50),
    ("iPhone", 9),
    ("A500", 5),
    ("N8-00", 4),
    ("iPho", 3),
    ("GT-I9300", 3),
    ("HTC One", 2),
    ("Lumia 920", 2),
    ("Galaxy Tab", 1),
    ("Xperia Z", 1),
]
TRAFIC_SOURCES = [
    (-1, 10),
    (0, 25),
    (1, 15),
    (2, 20),
    (3, 10),
    (4, 5),
    (5, 3),
    (6, 8),
    (7, 2),
    (8, 1),
    (9, 0.5),
    (10, 0.5),
]
SEARCH_ENGINES = [(2, 50), (3, 35), (1, 5), (4, 3), (5, 3), (6, 2), (9, 2)]
