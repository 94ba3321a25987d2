# themes/: colour themes as data files, installed to $(pkgdatadir)/themes
# (themesdir, Makefile.am) where the cockpit finds them by name.
dist_themes_DATA += themes/default.theme themes/light.theme \
	themes/high-contrast.theme themes/mono.theme
