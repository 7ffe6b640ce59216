// specula-demo: the Qt 6 desktop demo of Specula. Built on the public C++ wrapper specula.hpp alone, to show that the C ABI
// is enough for a real application (docs/demo.md).
#include "app/automation.h"
#include "engine/engine.h"
#include "ui/main_window.h"

#include <specula/specula.hpp>

#include <QApplication>
#include <QSettings>
#include <cstdio>

int main(int argc, char **argv) {
    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("Specula"));
    QApplication::setApplicationName(QStringLiteral("specula-demo"));
    QApplication::setApplicationVersion(QString::fromStdString(specula::version()));
    demo::register_engine_types();

    QString error, help;
    const std::optional<demo::AutomationOptions> options = demo::parse_automation(QApplication::arguments(), &error, &help);
    if (!options) {
        if (!help.isEmpty()) {
            std::fputs(help.toUtf8().constData(), stdout);
            return 0;
        }
        std::fprintf(stderr, "specula-demo: %s (see --help)\n", error.toUtf8().constData());
        return 2;
    }

    QSettings store;
    demo::MainWindow window(store, !options->any());
    window.show();
    if (!options->any()) window.restore_session();
    demo::Automation automation(&window, *options);
    automation.start();
    return QApplication::exec();
}
